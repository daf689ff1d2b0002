#!/usr/bin/env bash
# The flock benchmark drivers on the CPU backend, tiny: bench/flock/ab_builds.sh (and
# weak_scaling.sh under it) writes the baseline, a table row per run with its ms per iteration and
# efficiency, and a trace of B's last run that bench/flock/trace_summary.py reads; bad arguments
# exit with 2. What they measure is not checked here (the GPU machine's runs are in RESULTS.md).
set -euo pipefail
build=$1; src=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export FLOCK_WEAK_GPUS=2 FLOCK_WEAK_ARGS="--backend cpu" OMP_NUM_THREADS=1
FLOCK_AB_TRACE=1 "$src/bench/flock/ab_builds.sh" "$build" "$build" "$t/ab" 2 2 1500 8 > "$t/out" 2>&1 ||
    { cat "$t/out"; fail "ab_builds.sh failed"; }
[ -s "$t/ab/base/flock_weak_1.json" ] || fail "no baseline"
grep -Eq '^baseline \(B, 1 rank\): [0-9.]+ ms/iteration$' "$t/ab/ab.txt" || fail "no baseline line"
for run in a-r1 b-r1 a-r2 b-r2; do
  grep -Eq "^$run +[0-9.]+ +[0-9.]+% +" "$t/ab/ab.txt" || { cat "$t/ab/ab.txt"; fail "no row for $run"; }
  [ -s "$t/ab/$run/weak_scaling.txt" ] || fail "no weak_scaling.txt for $run"
done
# halo_pack is timed on every rank of a 2-rank run: its column holds a number
awk '$1 ~ /^[ab]-r[12]$/ && $4 !~ /^[0-9.]+$/ { bad = 1 } END { exit bad }' "$t/ab/ab.txt" || fail "halo_pack column"
[ -s "$t/ab/trace/b.0.tsv" ] && [ -s "$t/ab/trace/b.1.tsv" ] || fail "no trace of B's last run"
python3 "$src/bench/flock/trace_summary.py" "$t/ab/trace/b" --skip 2 > "$t/tr" || fail "trace_summary.py failed"
[ "$(grep -c '^rank [01]: 5 steps, mean' "$t/tr")" -eq 2 ] || { cat "$t/tr"; fail "trace summary: 5 steps per rank"; }
grep -q '^  end ' "$t/tr" || fail "trace summary: no end event"
if python3 "$src/bench/flock/trace_summary.py" "$t/none" > /dev/null 2>&1; then fail "trace_summary.py without traces exited 0"; fi
# bad arguments
set +e
"$src/bench/flock/ab_builds.sh" "$build" "$build" "$t/x" 1 > /dev/null 2>&1; [ $? -eq 2 ] || fail "G = 1 accepted"
"$src/bench/flock/ab_builds.sh" "$t/nowhere" "$build" "$t/x" > /dev/null 2>&1; [ $? -eq 2 ] || fail "a missing build accepted"
echo "ok"
