#!/usr/bin/env bash
# Two builds of flock against each other at one point of issue 6's weak scaling: the one-rank
# baseline of build B once, then the G-rank point (one rank per GPU, bench/flock/weak_scaling.sh)
# with A and B alternating for R rounds, so that a host that drifts affects both alike. Prints a
# line per run (ms per iteration, efficiency against the baseline, the halo's host parts of the
# slowest rank) and keeps every run's output.
#   bench/flock/ab_builds.sh BUILD_A BUILD_B OUTDIR [G (4)] [ROUNDS (2)] [DOCS_PER_RANK (1000000)] [ITERATIONS (200)]
# OUTDIR/base (the baseline), OUTDIR/{a,b}-r<k> (flock_weak_G.txt, .json) and OUTDIR/ab.txt.
# Environment: as weak_scaling.sh (FLOCK_WEAK_ARGS, FLOCK_WEAK_GPUS); FLOCK_AB_TRACE=1 traces the
# last run of B (DOCMINE_FLOCK_TRACE=OUTDIR/trace/b; bench/flock/trace_summary.py OUTDIR/trace/b).
# Example (the tree of a commit against the working tree, 4 GPUs):
#   git archive --prefix=old/ HEAD~3 | tar -x -C /tmp && cmake -S /tmp/old -B /tmp/old/build ... &&
#   bench/flock/ab_builds.sh /tmp/old/build build-gpu out/ab 4
# Exit codes: 0 every run ok, 1 a run failed (the baseline: at once; a round's run: its row is
# empty and the rounds go on), 2 usage error.
# No `set -e`: a failed run must not stop the rounds; each step that must work is checked.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: ab_builds.sh BUILD_A BUILD_B OUTDIR [G (4)] [ROUNDS (2)] [DOCS_PER_RANK (1000000)] [ITERATIONS (200)]"
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then echo "$usage"; exit 0; fi
[ $# -ge 3 ] && [ $# -le 7 ] || { echo "ab_builds: $usage" >&2; exit 2; }
ba=$1; bb=$2; out=$3
g=${4:-4}; rounds=${5:-2}; dpr=${6:-1000000}; iters=${7:-200}
for b in "$ba" "$bb"; do
    [ -x "$b/bench/flock/bench_flock" ] || { echo "ab_builds: $b/bench/flock/bench_flock not found (build the bench_flock target)" >&2; exit 2; }
done
[[ $g =~ ^[0-9]+$ ]] && [ "$g" -gt 1 ] || { echo "ab_builds: G must be an integer above 1" >&2; exit 2; }
[[ $rounds =~ ^[0-9]+$ ]] && [ "$rounds" -gt 0 ] || { echo "ab_builds: ROUNDS must be a positive integer" >&2; exit 2; }
[[ $dpr =~ ^[0-9]+$ ]] && [ "$dpr" -gt 0 ] || { echo "ab_builds: DOCS_PER_RANK must be a positive integer" >&2; exit 2; }
[[ $iters =~ ^[0-9]+$ ]] && [ "$iters" -gt 0 ] || { echo "ab_builds: ITERATIONS must be a positive integer" >&2; exit 2; }
mkdir -p "$out" || { echo "ab_builds: cannot create $out" >&2; exit 2; }
"$here/weak_scaling.sh" "$bb" "$out/base" "$dpr" "$iters" 1 > "$out/base.log" 2>&1 || { echo "ab_builds: the baseline failed ($out/base.log)" >&2; exit 1; }
status=0
{
    echo "baseline (B, 1 rank): $(sed -n 's/^run [0-9.]* s (\([0-9.]*\) ms\/iteration).*/\1/p' "$out/base/flock_weak_1.txt") ms/iteration"
    echo "A: $ba"
    echo "B: $bb"
    printf '%-6s %-10s %-11s %-12s %-11s %-12s %-12s %-10s\n' run ms/it efficiency halo_select halo_pack halo_unpack halo_upload halo_wait
} | tee "$out/ab.txt"
for ((r = 1; r <= rounds; r++)); do
    for v in a b; do
        d=$out/$v-r$r
        b=$ba; [ $v = b ] && b=$bb
        mkdir -p "$d"
        cp "$out/base/flock_weak_1.json" "$d/"
        if [ $v = b ] && [ $r -eq "$rounds" ] && [ "${FLOCK_AB_TRACE:-0}" = 1 ]; then
            mkdir -p "$out/trace"
            # an earlier invocation's traces (more ranks: b.3.tsv) must not join this run's
            rm -f "$out/trace/b".*.tsv
            export DOCMINE_FLOCK_TRACE=$out/trace/b
        fi
        "$here/weak_scaling.sh" "$b" "$d" "$dpr" "$iters" "$g" > "$d.log" 2>&1 || status=1
        unset DOCMINE_FLOCK_TRACE
        f=$d/flock_weak_$g.txt
        part() { awk -v n="$1" '$1 == n { print $4 }' "$f" 2>/dev/null | head -1; }
        printf '%-6s %-10s %-11s %-12s %-11s %-12s %-12s %-10s\n' "$v-r$r" \
            "$(sed -n 's/^run [0-9.]* s (\([0-9.]*\) ms\/iteration).*/\1/p' "$f" 2>/dev/null)" \
            "$(sed -n 's/.*efficiency \([0-9.]*%\).*/\1/p' "$f" 2>/dev/null | head -1)" \
            "$(part halo_select)" "$(part halo_pack)" "$(part halo_unpack)" "$(part halo_upload)" "$(part halo_wait)" | tee -a "$out/ab.txt"
    done
done
echo "(halo parts: ms per iteration, the slowest rank)" | tee -a "$out/ab.txt"
exit $status
