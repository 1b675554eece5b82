// The compiler's one mapping between the runtime's element types and MLIR's builtin types.
#include "compiler/Support/ElementTypes.h"

#include "gtest/gtest.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

namespace spark {
namespace {

TEST(ElementTypesTest, EveryRuntimeTypeIsItsMlirTypeAndBack) {
  mlir::MLIRContext context;
  for (rt::DType dtype : rt::kAllDTypes) {
    mlir::Type type = mlirElementType(dtype, &context);
    ASSERT_TRUE(type) << rt::DTypeName(dtype);
    // The runtime's name of a type is MLIR's.
    std::string printed;
    llvm::raw_string_ostream os(printed);
    type.print(os);
    EXPECT_EQ(printed, std::string(rt::DTypeName(dtype)));
    EXPECT_EQ(runtimeElementType(type), dtype) << printed;
  }
  EXPECT_TRUE(mlir::isa<mlir::Float4E2M1FNType>(mlirElementType(rt::DType::kF4E2M1FN, &context)));
  EXPECT_TRUE(mlir::isa<mlir::Float8E4M3FNType>(mlirElementType(rt::DType::kF8E4M3FN, &context)));
  // Types Spark has no name for.
  EXPECT_EQ(runtimeElementType(mlir::Float64Type::get(&context)), std::nullopt);
  EXPECT_EQ(runtimeElementType(mlir::Float8E5M2Type::get(&context)), std::nullopt);
  EXPECT_EQ(runtimeElementType(mlir::IntegerType::get(&context, 8)), std::nullopt);  // signless
}

}  // namespace
}  // namespace spark
