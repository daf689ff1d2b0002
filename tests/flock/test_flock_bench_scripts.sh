#!/usr/bin/env bash
# The flock benchmark drivers on the CPU backend, tiny: bench/flock/ab_builds.sh (and
# weak_scaling.sh under it) writes the baseline, a table row per run with its ms per iteration and
# efficiency, and a trace of B's last run that bench/flock/trace_summary.py reads; bad arguments
# exit with 2. What they measure is not checked here (the GPU machine's runs are in RESULTS.md).
# The output folder's name holds a space and brackets (a path the scripts must quote, a prefix
# trace_summary.py must not read as a pattern), and holds an earlier invocation's trace of more
# ranks, which must not join this one's.
set -euo pipefail
build=$1; src=$2
t0=$(mktemp -d); trap 'rm -rf "$t0"' EXIT
t="$t0/o u [t]"; mkdir -p "$t/ab/trace"
fail() { echo "FAIL: $*"; exit 1; }
export FLOCK_WEAK_GPUS=2 FLOCK_WEAK_ARGS="--backend cpu" OMP_NUM_THREADS=1
printf 'iteration\tevent\tseconds\n5\tbegin\t0\n5\tend\t1\n' > "$t/ab/trace/b.3.tsv"
FLOCK_AB_TRACE=1 "$src/bench/flock/ab_builds.sh" "$build" "$build" "$t/ab" 2 2 1500 8 > "$t/out" 2>&1 ||
    { cat "$t/out"; fail "ab_builds.sh failed"; }
[ ! -e "$t/ab/trace/b.3.tsv" ] || fail "an earlier invocation's trace (b.3.tsv) left beside this run's"
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
# a file beside the traces that is not PREFIX.RANK.tsv is left out; a rank's file that is not a
# trace is an error naming it (exit 1), not a traceback
echo x > "$t/ab/trace/b.old.tsv"
python3 "$src/bench/flock/trace_summary.py" "$t/ab/trace/b" --skip 2 > "$t/tr2" 2>&1 || { cat "$t/tr2"; fail "trace_summary.py with b.old.tsv beside"; }
cmp -s "$t/tr" "$t/tr2" || fail "trace_summary.py read b.old.tsv"
echo x > "$t/ab/trace/b.7.tsv"
set +e
python3 "$src/bench/flock/trace_summary.py" "$t/ab/trace/b" > "$t/tr3" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q 'b.7.tsv: not a flock trace' "$t/tr3" || { cat "$t/tr3"; fail "a bad trace file: exit $rc"; }
# bad arguments
set +e
"$src/bench/flock/ab_builds.sh" "$build" "$build" "$t/x" 1 > /dev/null 2>&1; [ $? -eq 2 ] || fail "G = 1 accepted"
"$src/bench/flock/ab_builds.sh" "$t/nowhere" "$build" "$t/x" > /dev/null 2>&1; [ $? -eq 2 ] || fail "a missing build accepted"
"$src/bench/flock/ab_builds.sh" "$build" "$build" > /dev/null 2>&1; [ $? -eq 2 ] || fail "ab_builds.sh without OUTDIR: not exit 2"
"$src/bench/flock/ab_builds.sh" "$build" "$build" "$t/x" 2 1 1e6 > /dev/null 2>&1; [ $? -eq 2 ] || fail "ab_builds.sh DOCS_PER_RANK 1e6 accepted"
"$src/bench/flock/ab_builds.sh" --help > "$t/h" 2>&1; [ $? -eq 0 ] && grep -q '^usage: ab_builds.sh' "$t/h" || fail "ab_builds.sh --help"
"$src/bench/flock/weak_scaling.sh" --help > "$t/h" 2>&1; [ $? -eq 0 ] && grep -q '^usage: weak_scaling.sh' "$t/h" || fail "weak_scaling.sh --help"
"$src/bench/flock/weak_scaling.sh" "$build" "$t/w" abc > "$t/h" 2>&1; [ $? -eq 2 ] && grep -q "DOCS_PER_RANK 'abc'" "$t/h" || fail "weak_scaling.sh DOCS_PER_RANK abc"
"$src/bench/flock/weak_scaling.sh" "$build" "$t/w" 100 0 > /dev/null 2>&1; [ $? -eq 2 ] || fail "weak_scaling.sh ITERATIONS 0 accepted"
FLOCK_WEAK_GPUS=two "$src/bench/flock/weak_scaling.sh" "$build" "$t/w" 100 2 1 > "$t/h" 2>&1; [ $? -eq 2 ] && grep -q "FLOCK_WEAK_GPUS 'two'" "$t/h" || fail "FLOCK_WEAK_GPUS=two accepted"
set -e
echo "ok"
