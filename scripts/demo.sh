#!/usr/bin/env bash
# The README's main command: builds docmine if needed and runs the whole pipeline (preprocess ->
# TF-IDF -> flock) on the embedded default corpus: 20000 labelled synthetic documents from 10
# topics, generated in memory. Prints where the outputs and the picture are and the NMI against
# the generator's labels. Uses the GPU when there is one (--backend auto), else the CPU backend.
# Extra arguments go to `docmine pipeline` (e.g. --method streamclust, --synthetic 5000).
set -euo pipefail
cd "$(dirname "$0")/.."
# the CUDA build only where it can run: with nvcc but no GPU the CPU build is the one the demo
# uses anyway, and it compiles in a fraction of the time
gpu=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
if [ $gpu = 1 ] && { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
    export PATH="$PATH:/usr/local/cuda/bin"; preset=default; bin=build/apps/docmine
else
    preset=cpu; bin=build-cpu/apps/docmine
fi
if [ ! -x "$bin" ] || ! "$bin" --help | grep -q '^  pipeline '; then
    echo "demo: building docmine ($preset preset)"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
fi
mkdir -p out
if [ "$preset" = cpu ]; then
    echo "demo: CPU build (no GPU here, or no CUDA toolkit): about half a minute (a GPU takes seconds)"
fi
# 30 expected neighbours: each topic's similar documents connect from the start (bench/RESULTS.md);
# 100 iterations keep the CPU run short. Not with --method streamclust among the extra arguments:
# docmine refuses flock's options there.
method=flock; prev=""
for a in "$@"; do
    [ "$prev" != --method ] || method=$a
    case $a in --method=*) method=${a#--method=} ;; esac
    prev=$a
done
model=(--method flock --neighbours 30 --iterations 100)
[ "$method" = flock ] || model=()
exec "$bin" pipeline --synthetic default "${model[@]}" -o out/demo --progress "$@"
