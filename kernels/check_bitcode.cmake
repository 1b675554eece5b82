# cmake -DBITCODE=<linked .bc> -DLLVM_DIS=<llvm-dis> -DABI_HEADER=<kernel_ops.def> -DTARGET=<t>
#       -P check_bitcode.cmake
# Fails (non-zero exit, message naming the culprits) when the linked kernel library
#   - declares an external function that is not an LLVM intrinsic (`@llvm.*`): nothing else can
#     be resolved later, because no libdevice (`__nv_*`) or other library is linked; or
#   - does not define every spark_<op> device function of the op registry (kernel_ops.def); or
#   - defines the activation precision constant (kActivationPrecisionSymbol) instead of
#     declaring it: spark-compile defines it in each generated module.
foreach(_var BITCODE LLVM_DIS ABI_HEADER TARGET)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "check_bitcode.cmake: -D${_var}=... is required")
  endif()
endforeach()

execute_process(
  COMMAND ${LLVM_DIS} ${BITCODE} -o -
  OUTPUT_VARIABLE _ir
  ERROR_VARIABLE _err
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "kernels (${TARGET}): llvm-dis failed on ${BITCODE}: ${_err}")
endif()

# External declarations other than intrinsics.
string(REGEX MATCHALL "\ndeclare [^\n]*" _decls "${_ir}")
set(_bad)
foreach(_d IN LISTS _decls)
  string(REGEX MATCH "@[\"]?[A-Za-z0-9_.$]+" _name "${_d}")
  string(SUBSTRING "${_name}" 1 -1 _name)
  string(REPLACE "\"" "" _name "${_name}")
  if(NOT _name MATCHES "^llvm\\.")
    list(APPEND _bad ${_name})
  endif()
endforeach()
if(_bad)
  list(JOIN _bad ", " _bad_text)
  message(FATAL_ERROR
    "kernels (${TARGET}): ${BITCODE} calls external functions that nothing will resolve: "
    "${_bad_text}. The library is built with -nocudalib (no libdevice): use the helpers in "
    "kernels/math.cuh or clang builtins instead of CUDA math functions (expf, tanhf, powf, "
    "sinf, fmaf, sqrtf, __expf, __uint_as_float, ...).")
endif()

# Every op of the registry has its device function defined (not just declared): the entries
# OP(Name, op, ...) of SPARK_KERNEL_OPS.
file(READ ${ABI_HEADER} _abi)
string(REGEX MATCHALL "\n  OP\\([A-Za-z0-9]+, [a-z0-9_]+," _entries "${_abi}")
set(_symbols)
foreach(_e IN LISTS _entries)
  string(REGEX REPLACE "\n  OP\\([A-Za-z0-9]+, ([a-z0-9_]+)," "spark_\\1" _s "${_e}")
  list(APPEND _symbols ${_s})
endforeach()
list(REMOVE_DUPLICATES _symbols)
if(NOT _ir MATCHES "\n@spark_activation_precision = external [^\n]*constant i32")
  message(FATAL_ERROR
    "kernels (${TARGET}): ${BITCODE} must declare (not define) the constant "
    "spark_activation_precision (kernel_abi.h kActivationPrecisionSymbol)")
endif()
set(_missing)
foreach(_s IN LISTS _symbols)
  string(REGEX MATCH "\ndefine [^\n]*@${_s}\\(" _def "${_ir}")
  if(NOT _def)
    list(APPEND _missing ${_s})
  endif()
endforeach()
if(_missing)
  list(JOIN _missing ", " _missing_text)
  message(FATAL_ERROR
    "kernels (${TARGET}): ${BITCODE} does not define ${_missing_text} (listed in ${ABI_HEADER})")
endif()
list(LENGTH _symbols _n)
if(_n EQUAL 0)
  message(FATAL_ERROR "kernels (${TARGET}): found no spark_* symbols in ${ABI_HEADER}")
endif()
