#!/usr/bin/env bash
# Configure, build and run the whole test suite: the README's test command.
# Uses the `default` preset (CUDA backend) when nvcc is available, else the `cpu` preset.
# GPU tests are skipped (reported as "Not Run"/skipped) on machines without a GPU.
#   scripts/test.sh [extra ctest arguments, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
    preset=default
else
    preset=cpu
fi
jobs=$(nproc 2>/dev/null || echo 2)
# DOCMINE_CUDA_ARCH (e.g. 90) builds one CUDA architecture instead of the preset's two
extra=()
[ -n "${DOCMINE_CUDA_ARCH:-}" ] && [ "$preset" = default ] && extra=(-DCMAKE_CUDA_ARCHITECTURES="$DOCMINE_CUDA_ARCH")
cmake --preset "$preset" "${extra[@]}" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs" "$@"
