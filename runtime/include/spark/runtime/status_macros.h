// Status propagation macros (absl 20220623 ships none), for the runtime and the tools built on its
// public API (engine.h, session.h).
#ifndef SPARK_RUNTIME_STATUS_MACROS_H_
#define SPARK_RUNTIME_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPARK_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define SPARK_STATUS_MACROS_CONCAT_(a, b) SPARK_STATUS_MACROS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define SPARK_RETURN_IF_ERROR(expr)                               \
  do {                                                            \
    const ::absl::Status spark_status_macros_status_ = (expr);    \
    if (!spark_status_macros_status_.ok()) {                      \
      return spark_status_macros_status_;                         \
    }                                                             \
  } while (0)

// `lhs = *expr` for an absl::StatusOr<T> `expr`, returning its status when it is not OK.
// `lhs` may declare a variable: SPARK_ASSIGN_OR_RETURN(Plan plan, ParsePlan(...));
#define SPARK_ASSIGN_OR_RETURN(lhs, expr) \
  SPARK_ASSIGN_OR_RETURN_IMPL_(SPARK_STATUS_MACROS_CONCAT_(spark_statusor_, __LINE__), lhs, expr)

#define SPARK_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // SPARK_RUNTIME_STATUS_MACROS_H_
