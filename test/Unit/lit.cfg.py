# GoogleTest binaries under lit (the llvm/circt test/Unit way).
import os
import lit.formats

config.name = "Spark-Unit"
config.suffixes = []
config.test_source_root = os.path.join(config.spark_obj_root, "test", "Unit")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
