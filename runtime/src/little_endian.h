// Little-endian loads and stores on byte buffers, independent of the host's byte order and of
// alignment. Internal to the runtime.
#ifndef SPARK_RUNTIME_SRC_LITTLE_ENDIAN_H_
#define SPARK_RUNTIME_SRC_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string>

namespace spark {
namespace rt {

template <typename T>
T LoadLittleEndian(const char* bytes) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

template <typename T>
void AppendLittleEndian(T value, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_SRC_LITTLE_ENDIAN_H_
