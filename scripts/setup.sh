#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Spark. Idempotent: packages that
# are already installed are skipped, so a second run costs a few seconds.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 git
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 libclang-rt-22-dev
  libabsl-dev libgtest-dev nlohmann-json3-dev
  python3-jinja2  # test/tools/chat-template: the chat-template goldens re-rendered by jinja2
)

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
