// The name of the entry point spark-compile generates for a plan step. A step's literal (i32 /
// f32) arguments are compiled into its entry as constants (docs/plan-format.md), so the name
// states them: the op's device function, "__", then each literal in ABI order, joined by "_" —
// "i<n>" for an i32 (n >= 0), "m<n>" for a negative one (-n), "f<8 hex digits>" for the bits of
// an f32. For example spark_linear__i512_i64 (out_features 512, in_features 64).
//
// The compiler names its entries with these functions and the plan reader recomputes the name of
// every step (plan.h EntryPointOf): a step whose `kernel` names another entry is refused, so a
// rewritten plan cannot point a step at code compiled for other sizes.
//
// Plain C++17, no dependencies: the runtime owns it and the compiler includes it.
#ifndef SPARK_RUNTIME_ENTRY_POINT_H_
#define SPARK_RUNTIME_ENTRY_POINT_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace spark {

// Starts an entry name: "<symbol>__".
inline std::string EntryPointPrefix(const char* symbol) { return std::string(symbol) + "__"; }

// Appends one literal argument to a name EntryPointPrefix started.
inline void AppendEntryLiteral(std::string* name, int32_t value) {
  if (name->size() < 2 || name->compare(name->size() - 2, 2, "__") != 0) name->push_back('_');
  const int64_t v = value;
  name->push_back(v < 0 ? 'm' : 'i');
  *name += std::to_string(v < 0 ? -v : v);
}
inline void AppendEntryLiteral(std::string* name, float value) {
  if (name->size() < 2 || name->compare(name->size() - 2, 2, "__") != 0) name->push_back('_');
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  static const char kHex[] = "0123456789abcdef";
  name->push_back('f');
  for (int shift = 28; shift >= 0; shift -= 4) name->push_back(kHex[(bits >> shift) & 0xf]);
}

}  // namespace spark

#endif  // SPARK_RUNTIME_ENTRY_POINT_H_
