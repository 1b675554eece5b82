# lit configuration for Spark's FileCheck suites (dialect, passes, import, compile, tools).
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "Spark"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".json"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.spark_obj_root, "test")
# Unit/ has its own config; Inputs/ and data/ hold fixtures, not tests.
config.excludes = ["Unit", "Inputs", "data", "lit.cfg.py", "CMakeLists.txt", "gpu", "reference", "fuzz"]

llvm_config.with_system_environment(["HOME", "TMPDIR"])
# A build without the compiler (the sanitizer build) may borrow spark-import and spark-compile
# from another build (SPARK_COMPILER_TOOLS_DIR); this build's own tools come first in PATH.
compiler_tools_dir = getattr(config, "spark_compiler_tools_dir", "")
borrowed_compiler = (not config.spark_has_compiler and compiler_tools_dir
                     and os.path.exists(os.path.join(compiler_tools_dir, "spark-compile")))
if borrowed_compiler:
    llvm_config.with_environment("PATH", compiler_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.spark_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# Tests must not see a user's module path or ptxas choice.
for var in ["SPARK_MODULE_PATH", "SPARK_PTXAS", "CUDA_HOME", "CUDA_PATH"]:
    config.environment.pop(var, None)

config.substitutions.append(("%spark_src_root", config.spark_src_root))
config.substitutions.append(("%spark_obj_root", config.spark_obj_root))
config.substitutions.append(("%cuda_root", config.cuda_root))
config.substitutions.append(("%models", os.path.join(config.spark_src_root, "test", "data", "models")))
config.substitutions.append(("%gemma3_tokenizer", os.path.join(os.environ.get("SPARK_CACHE_DIR") or os.path.expanduser("~/.cache/spark"), "tokenizer-gemma3-3.7.2", "package", "models", "tokenizer.json")))
# The OpenAI Node client the spark-serve tests use (scripts/setup.sh installs it).
openai_node_modules = os.path.join(os.environ.get("SPARK_CACHE_DIR") or os.path.expanduser("~/.cache/spark"), "openai-node-6.30.1", "node_modules")
config.environment["NODE_PATH"] = openai_node_modules
if os.path.exists(os.path.join(openai_node_modules, "openai", "package.json")) and shutil.which("node"):
    config.available_features.add("openai-node")
if os.path.exists(os.path.join(config.spark_tools_dir, "spark-serve")):
    config.available_features.add("spark-serve")
# A JSON document on stdin printed compactly (as spark-run --dump-plan's JSON, unindented), for
# FileCheck lines that match several members on one line.
config.substitutions.append(("%compact-json", "python3 -c \"import json, sys; print(json.dumps(json.load(sys.stdin), separators=(',', ':')))\""))
config.substitutions.append(("%configs", os.path.join(config.spark_src_root, "test", "data", "configs")))

if config.spark_has_compiler or borrowed_compiler:
    config.available_features.add("compiler")
if os.path.exists(os.path.join(config.cuda_root, "bin", "ptxas")):
    config.available_features.add("ptxas")
if os.path.exists(os.path.join(config.cuda_root, "bin", "nvcc")):
    config.available_features.add("nvcc")
# The AddressSanitizer build (scripts/sanitize.sh): it reserves terabytes of address space, so
# tests of `ulimit -v` cannot run under it.
if "address" in getattr(config, "spark_sanitize", ""):
    config.available_features.add("asan")
# One feature per target whose kernel library is built (kernels/CMakeLists.txt).
for target in getattr(config, "spark_kernel_targets", "").split(";"):
    if target:
        config.available_features.add("kernels-" + target)

# GPU tests run only where `spark-run --list-devices` finds a device.
spark_run = os.path.join(config.spark_tools_dir, "spark-run")
if config.spark_gpu_tests and os.path.exists(spark_run):
    try:
        if subprocess.run([spark_run, "--list-devices"], capture_output=True, timeout=60).returncode == 0:
            config.available_features.add("cuda-device")
    except Exception:
        pass
