#!/usr/bin/env bash
# Weak scaling of flock on one host: bench_flock on 1, 2 and 4 ranks (one rank per GPU) with the
# same documents per rank. The one-rank run is the baseline; every larger run prints its
# efficiency t(1 rank) / t(P ranks) per iteration and its communication fraction, and a table of
# all runs closes the output. Runs that need more GPUs than the host has are skipped.
#   bench/flock/weak_scaling.sh BUILD_DIR OUTDIR [DOCS_PER_RANK (1000000)] [ITERATIONS (200)] [RANKS ("1 2 4")]
# OUTDIR receives flock_weak_P.json and flock_weak_P.txt per run and weak_scaling.txt (the table).
# Each rank uses (cores / ranks) OpenMP threads for the input (synthetic vectors) and the host side.
# Environment: FLOCK_WEAK_ARGS, more bench_flock options (e.g. "--backend cpu"); FLOCK_WEAK_GPUS,
# the number of ranks the host can take (default: its GPUs).
# Exit codes: 0 every run ok, 1 a run failed (the others still run; the table shows '?'), 2 usage
# error (bad arguments, no bench_flock in BUILD_DIR, no mpiexec, OUTDIR not writable).
# No `set -e`: a failed run must not stop the series; each step that must work is checked.
set -uo pipefail
usage="usage: weak_scaling.sh BUILD_DIR OUTDIR [DOCS_PER_RANK (1000000)] [ITERATIONS (200)] [RANKS (\"1 2 4\")]"
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then echo "$usage"; exit 0; fi
[ $# -ge 2 ] && [ $# -le 5 ] || { echo "weak_scaling: $usage" >&2; exit 2; }
build=$1
out=$2
dpr=${3:-1000000}
iters=${4:-200}
ranks=${5:-"1 2 4"}
bench=$build/bench/flock/bench_flock
[ -x "$bench" ] || { echo "weak_scaling: $bench not found (build the bench_flock target)" >&2; exit 2; }
[[ $dpr =~ ^[0-9]+$ ]] && [ "$dpr" -gt 0 ] || { echo "weak_scaling: DOCS_PER_RANK '$dpr' is not a positive integer" >&2; exit 2; }
[[ $iters =~ ^[0-9]+$ ]] && [ "$iters" -gt 0 ] || { echo "weak_scaling: ITERATIONS '$iters' is not a positive integer" >&2; exit 2; }
for p in $ranks; do
    [[ $p =~ ^[0-9]+$ ]] && [ "$p" -gt 0 ] || { echo "weak_scaling: bad rank count '$p'" >&2; exit 2; }
done
[ -n "${ranks// /}" ] || { echo "weak_scaling: RANKS is empty" >&2; exit 2; }
command -v mpiexec > /dev/null || { echo "weak_scaling: mpiexec not found (install MPI or load its module)" >&2; exit 2; }
mkdir -p "$out" || { echo "weak_scaling: cannot create $out" >&2; exit 2; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ngpu=${FLOCK_WEAK_GPUS:-${ngpu:-0}}
[[ $ngpu =~ ^[0-9]+$ ]] || { echo "weak_scaling: FLOCK_WEAK_GPUS '$ngpu' is not a number" >&2; exit 2; }
read -r -a extra <<< "${FLOCK_WEAK_ARGS:-}"
cores=$(nproc)
status=0
for p in $ranks; do
    # an earlier invocation's files of this rank count must not stand in for this one's (a
    # failed or skipped run): the table reads them and the one-rank JSON is the baseline
    rm -f "$out/flock_weak_$p.json" "$out/flock_weak_$p.txt"
    if [ "$p" -gt "$ngpu" ]; then
        echo "== $p ranks: skipped ($ngpu GPU(s) on this host)"
        continue
    fi
    base=()
    if [ "$p" -gt 1 ]; then
        if [ -f "$out/flock_weak_1.json" ]; then base=(--baseline "$out/flock_weak_1.json")
        else echo "== $p ranks: no one-rank baseline in $out (run with RANKS including 1 first)"; fi
    fi
    threads=$(( cores / p )); [ "$threads" -ge 1 ] || threads=1
    echo "== $p ranks x $dpr documents, $iters iterations ($threads threads per rank)"
    t0=$(date +%s)
    OMP_NUM_THREADS=$threads mpiexec -n "$p" "$bench" --docs-per-rank "$dpr" --iterations "$iters" \
        --json "$out/flock_weak_$p.json" "${base[@]}" "${extra[@]}" 2>&1 | tee "$out/flock_weak_$p.txt"
    rc=${PIPESTATUS[0]}
    echo "== $p ranks: exit $rc, $(( $(date +%s) - t0 )) s"
    [ "$rc" -eq 0 ] || status=1
done
{
    printf '%-6s %-12s %-14s %-12s %-14s\n' ranks documents ms/iteration efficiency communication
    for p in $ranks; do
        f=$out/flock_weak_$p.txt
        [ -f "$f" ] || continue
        docs=$(sed -n 's/^flock benchmark: \([0-9]*\) documents.*/\1/p' "$f")
        ms=$(sed -n 's/^run [0-9.]* s (\([0-9.]*\) ms\/iteration).*/\1/p' "$f")
        comm=$(sed -n 's/.*communication \([0-9.]*%\) of a step$/\1/p' "$f" | head -1)
        eff=$(sed -n 's/.*efficiency \([0-9.]*%\).*/\1/p' "$f")
        [ "$p" -eq 1 ] && eff="(baseline)"
        printf '%-6s %-12s %-14s %-12s %-14s\n' "$p" "${docs:-?}" "${ms:-?}" "${eff:-?}" "${comm:-?}"
    done
} | tee "$out/weak_scaling.txt"
exit $status
