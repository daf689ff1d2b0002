#!/usr/bin/env bash
# One run on a GPU machine answers everything: configure + build, the GPU tests, the GPU tests
# again under compute-sanitizer (memcheck and racecheck), the whole suite, `docmine info
# --bandwidth` on every GPU, the benchmarks that exist, and a summary table last.
#   scripts/gpu-check.sh OUTDIR [--quick | --no-bench | --bench-only]
#     --quick: no sanitizer, no benchmarks; --no-bench: no benchmarks; --bench-only: build,
#     bandwidth and benchmarks (for a second run within one lease).
# OUTDIR receives summary.txt, gpu-check.log, bandwidth.json, bench.json and logs.tar.gz.
# Limits: DOCMINE_SANITIZER_TIMEOUT (s per program and tool, default 240), DOCMINE_BENCH_TIMEOUT
# (s per benchmark, default 300); DOCMINE_BENCH_ONLY: a regex selecting benchmarks by name.
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR [--quick | --no-bench | --bench-only]}
case "$out" in -*) echo "gpu-check: the first argument is OUTDIR, not an option ($out)" >&2; exit 2 ;; esac
mode=${2:-}
tests=1; sanitize=1; bench=1
case "$mode" in
    --quick) sanitize=0; bench=0 ;;
    --no-bench) bench=0 ;;
    --bench-only) tests=0; sanitize=0 ;;
    "") ;;
    *) echo "gpu-check: unknown option $mode"; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out" || exit 2
logs=$(mktemp -d)
summary=$out/summary.txt  # written as we go: it survives a time-out
: > "$summary"
exec > >(tee "$out/gpu-check.log") 2>&1
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$summary" >/dev/null; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)  # grep -c prints 0 itself
ngpu=${ngpu:-0}
echo "== $(date -u +%FT%TZ) on $(hostname): $ngpu GPU(s)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>/dev/null
arch=${DOCMINE_CUDA_ARCH:-90}
b=build-gpu
echo "== build (CUDA arch $arch)"
t0=$(date +%s)
if cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" > $logs/configure.log 2>&1 &&
   cmake --build $b -j "$(nproc)" > $logs/build.log 2>&1; then
    row "build" "ok ($(( $(date +%s) - t0 )) s, $(grep -c 'warning' $logs/build.log) warnings)"
else
    tail -50 $logs/configure.log $logs/build.log
    row "build" "FAILED"
    tar -czf "$out/logs.tar.gz" -C "$logs" . ; cat "$summary"; exit 1
fi
export DOCMINE_DATASETS=${DOCMINE_DATASETS:-$PWD/.data/datasets}
if [ $tests = 1 ]; then
echo "== ctest -L gpu"
ctest --test-dir $b -L gpu --output-on-failure > $logs/ctest-gpu.log 2>&1
row "ctest -L gpu" "$(grep -E 'tests passed|tests failed' $logs/ctest-gpu.log | tail -1)"
cat $logs/ctest-gpu.log | tail -25
echo "== ctest (all labels)"
OMP_NUM_THREADS=2 ctest --test-dir $b -j 8 --timeout 180 --output-on-failure > "$out/ctest-all.log" 2>&1
row "ctest (all)" "$(grep -E 'tests passed|tests failed' "$out/ctest-all.log" | tail -1)"
grep -E 'Failed|\*\*\*|Timeout' "$out/ctest-all.log" | head -20
fi
if [ $sanitize = 1 ]; then
    # the GPU test programs, each run once as a single process under each sanitizer tool
    mapfile -t progs < <(ctest --test-dir $b -L gpu --show-only=json-v1 | python3 -c '
import json, sys, os
seen = []
for t in json.load(sys.stdin)["tests"]:
    cmd = t["command"]
    if os.path.basename(cmd[0]).startswith("mpiexec"): cmd = cmd[3:]
    if cmd not in seen: seen.append(cmd)
for c in seen: print(" ".join(c))')
    for tool in memcheck racecheck; do
        okc=0; bad=0
        for p in "${progs[@]}"; do
            name=$(basename ${p%% *})
            # API errors are checked by docmine itself (and tests provoke some on purpose, e.g. an
            # impossible cudaMalloc); the sanitizer is here for memory errors and races.
            if DOCMINE_SANITIZER=$tool timeout ${DOCMINE_SANITIZER_TIMEOUT:-240} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 $p > $logs/sanitizer-$tool-$name.log 2>&1; then
                okc=$((okc + 1))
            else
                bad=$((bad + 1)); echo "sanitizer $tool FAILED: $p"; tail -30 $logs/sanitizer-$tool-$name.log
            fi
        done
        row "compute-sanitizer $tool" "$okc clean, $bad failed (of ${#progs[@]} GPU test programs)"
    done
fi
echo "== docmine info --bandwidth"
np=$(( ngpu > 2 ? ngpu : 2 ))   # at least 2 ranks: ranks share a GPU when there is one
mpiexec -n $np $b/apps/docmine info --bandwidth --report "$out/bandwidth.json" 2>&1 | tee $logs/bandwidth.txt
row "info --bandwidth (ranks=$np)" "$(awk '/^bandwidth/{f=1;next} f&&/^[0-9]/{printf "r%s H2D %s D2H %s D2D %s; ", $1, $(NF-3), $(NF-2), $(NF-1)}' $logs/bandwidth.txt)"
if [ $bench = 1 ] && [ -d $b/bench ]; then
    echo "== benchmarks"
    echo '{' > "$out/bench.json"; first=1
    for x in $(find $b/bench -maxdepth 3 -type f -executable -name 'bench_*' | sort); do
        name=$(basename $x)
        [[ "$name" =~ ${DOCMINE_BENCH_ONLY:-.} ]] || continue
        echo "-- $name"
        if timeout ${DOCMINE_BENCH_TIMEOUT:-300} $x --json $logs/$name.json > $logs/$name.txt 2>&1; then
            row "bench $name" "ok"
        else
            row "bench $name" "FAILED or timed out (rc $?)"
        fi
        cat $logs/$name.txt
        if [ -s $logs/$name.json ]; then
            [ $first = 1 ] || echo ',' >> "$out/bench.json"; first=0
            printf '"%s": ' "$name" >> "$out/bench.json"; cat $logs/$name.json >> "$out/bench.json"
        fi
    done
    echo '}' >> "$out/bench.json"
fi

tar -czf "$out/logs.tar.gz" -C "$logs" .
echo; echo "== summary"; cat "$summary"
