#!/usr/bin/env bash
# Line and branch coverage of the host code by the test suite (CPU backend, so no CUDA source is
# counted): configures and builds the `coverage` preset (Debug, gcov counters), runs its ctest,
# then gcovr summarises the library and program directories (tests, benchmarks and fuzzers left
# out) into a table per file and an HTML report.
#   scripts/coverage.sh [OUTDIR (build-coverage/report)] [ctest arguments, e.g. -R flock]
# Needs gcovr (Debian: apt-get install gcovr). The counters add up over runs: the script clears
# them before ctest. With ctest arguments only the tests chosen are counted.
# Environment: OMP_NUM_THREADS (default 2), DOCMINE_COVERAGE_JOBS (ctest -j, default the CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-coverage/report
# OUTDIR may be left out: a first argument that starts with '-' is ctest's
if [ $# -gt 0 ] && [[ $1 != -* ]]; then out=$1; shift; fi
command -v gcovr >/dev/null || { echo "coverage: gcovr not found (apt-get install gcovr)" >&2; exit 2; }
jobs=${DOCMINE_COVERAGE_JOBS:-$(nproc 2>/dev/null || echo 2)}
cmake --preset coverage >/dev/null
cmake --build --preset coverage -j "$jobs" >/dev/null
find build-coverage -name '*.gcda' -delete
status=0
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ctest --preset coverage -j "$jobs" "$@" || status=$?
mkdir -p "$out"
dirs=(apps common preprocess tfidf sorting flock streamclust)
filters=()
for d in "${dirs[@]}"; do filters+=(--filter "$d/"); done
gcovr -r . --object-directory build-coverage "${filters[@]}" --exclude-unreachable-branches \
    --txt "$out/summary.txt" --html-details "$out/index.html" --json-summary "$out/summary.json" \
    --print-summary | tail -3
echo "coverage: per file in $out/summary.txt, annotated sources in $out/index.html"
[ $status -eq 0 ] || echo "coverage: some tests failed (ctest exit $status); the counts cover what ran" >&2
exit $status
