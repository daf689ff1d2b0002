#!/usr/bin/env bash
# A/B of environment settings at one point of the weak-scaling series: the same `docmine pipeline`
# run (G ranks, each on its own cores, as jobs/weak-scaling.sh runs a point under mpiexec) under
# two or more variants of the environment, the variants alternating within each round so that a
# host that drifts (memory backing, clocks, neighbours) affects them alike; then a table of the
# chosen timers (the slowest rank's) per run and each variant's median, and a CSV.
#
#   jobs/ab.sh --variant "ENV" --variant "ENV" [options] [-- further pipeline options]
#     --variant "ENV"     one variant: NAME=VALUE words, or "" for the environment as it is
#                         (at least two; numbered v1, v2, ... in the order given)
#     --gpus G            ranks of the point (default 4)
#     --method M          flock or streamclust (default flock)
#     --docs-per-gpu N    documents per rank (default 1000000)
#     --rounds R          rounds; each runs every variant once, in order (default 2)
#     --timers LIST       comma-separated timers (default: the pipeline's stages and the method's
#                         main parts); a timer a report lacks is left blank
#     --out DIR           runs in DIR/v<k>-r<round>/<method>-<G>, the table in DIR/ab.csv
#                         (default out/ab)
#     --docmine PATH      the binary (default build/apps/docmine)
#     --touch-memory GIB, --cores-per-rank C, --bind-order O, --no-bind
#                         passed to jobs/weak-scaling.sh (touching only before the first run)
#   DIR/ab.csv: variant,environment,round,timer,seconds (one row per run and timer).
#   Each run's environment is also in its report.json ("environment").
# Example (is 8 staging threads better than all at 4 GPUs?):
#   jobs/ab.sh --variant "DOCMINE_STAGE_THREADS=0" --variant "" --docmine build-gpu/apps/docmine \
#       --touch-memory 128 -- --neighbours 30 --iterations 100
# Exit: 0 when every run wrote its report, 1 when one did not (the table has the others), 2 on bad
# options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
variants=(); gpus=4; method=flock; dpg=1000000; rounds=2; timers=""; out=out/ab; docmine=build/apps/docmine
pass=(); touch=""; extra=(); bad_cpr=0; bad_order=0
while [ $# -gt 0 ]; do
    case $1 in --variant|--gpus|--method|--docs-per-gpu|--rounds|--timers|--out|--docmine|--touch-memory|--cores-per-rank|--bind-order)
        [ $# -ge 2 ] || { echo "ab.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
    esac
    case $1 in
    --variant) variants+=("$2"); shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --method) method=$2; shift 2 ;;
    --docs-per-gpu) dpg=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --timers) timers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --docmine) docmine=$2; shift 2 ;;
    --touch-memory) touch=$2; shift 2 ;;
    --cores-per-rank) [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] || bad_cpr=1; pass+=("$1" "$2"); shift 2 ;;
    --bind-order) case $2 in physical|linear) ;; *) bad_order=1 ;; esac; pass+=("$1" "$2"); shift 2 ;;
    --no-bind) pass+=("$1"); shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
bad() { echo "ab.sh: $*" >&2; exit 2; }
[ ${#variants[@]} -ge 2 ] || bad "give at least two --variant"
[[ $gpus =~ ^[0-9]+$ ]] && [ "$gpus" -gt 0 ] || bad "--gpus must be a positive integer"
[[ $rounds =~ ^[0-9]+$ ]] && [ "$rounds" -gt 0 ] || bad "--rounds must be a positive integer"
# what jobs/weak-scaling.sh would refuse in every run (exit 2 there: each run would fail)
[[ $dpg =~ ^[0-9]+$ ]] && [ "$dpg" -gt 0 ] || bad "--docs-per-gpu must be a positive integer"
[ -z "$touch" ] || [[ $touch =~ ^[0-9]+$ ]] || bad "--touch-memory must be a whole number of GiB"
[ $bad_cpr -eq 0 ] || bad "--cores-per-rank must be a positive integer"
[ $bad_order -eq 0 ] || bad "--bind-order must be physical or linear"
case $method in flock|streamclust) ;; *) bad "--method must be flock or streamclust" ;; esac
[ -n "$out" ] || bad "--out must not be empty"
for v in "${variants[@]}"; do
    read -r -a words <<< "$v"
    for w in "${words[@]}"; do
        [[ $w =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || bad "variant '$v': '$w' is not NAME=VALUE"
    done
done
[ -x "$docmine" ] || bad "$docmine not found (build first or pass --docmine)"
if [ -z "$timers" ]; then
    timers=pipeline.total,pipeline.preprocess,pipeline.tfidf,tfidf.weigh.d2h
    if [ "$method" = flock ]; then
        timers+=,flock.setup,flock.setup.distribute,flock.run,flock.comm.halo_pack,flock.comm.halo_unpack
        timers+=,flock.comm.halo_wait,flock.agree,flock.clusters,flock.output
    else
        timers+=,streamclust.total,streamclust.local_search,streamclust.top_terms,streamclust.files
    fi
fi
mkdir -p "$out"
status=0
for ((r = 1; r <= rounds; r++)); do
    for k in "${!variants[@]}"; do
        v=${variants[$k]}; dir=$out/v$((k + 1))-r$r
        read -r -a words <<< "$v"
        opts=(--launcher mpiexec --gpus "$gpus" --methods "$method" --docs-per-gpu "$dpg" --docmine "$docmine" --out "$dir"
              "${pass[@]}")
        [ -n "$touch" ] && [ "$r" -eq 1 ] && [ "$k" -eq 0 ] && opts+=(--touch-memory "$touch")
        rm -rf "${dir:?}"
        echo "+ round $r, v$((k + 1)): ${v:-(the environment as it is)}"
        if ! env "${words[@]}" "$here/weak-scaling.sh" "${opts[@]}" -- "${extra[@]}" > "$dir.log" 2>&1; then
            echo "ab.sh: round $r, v$((k + 1)) failed (log: $dir.log)" >&2
            status=1
        fi
    done
done
python3 - "$out" "$method-$gpus" "$rounds" "$timers" "${variants[@]}" <<'PY'
import csv, json, statistics, sys
out, point, rounds, timers, variants = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(","), sys.argv[5:]
runs = []  # (variant index, round, timers of the report or None)
for r in range(1, rounds + 1):
    for k in range(len(variants)):
        try:
            with open(f"{out}/v{k + 1}-r{r}/{point}/report.json") as f:
                t = json.load(f).get("timers_s", {})
        except (OSError, ValueError):
            t = None
        runs.append((k, r, t))
def val(t, name):
    return float(t[name]["max"]) if t and name in t else None
for k, v in enumerate(variants):
    print(f"v{k + 1}: {v or '(the environment as it is)'}")
print(f"{point}, s (the slowest rank), by round; then each variant's median")
head = [f"v{k + 1}:r{r}" for k, r, _ in runs] + [f"med v{k + 1}" for k in range(len(variants))]
w = max(len(n) for n in timers)
print(f"{'timer':<{w}} " + " ".join(f"{h:>8}" for h in head))
for name in timers:
    cells = [val(t, name) for _, _, t in runs]
    for k in range(len(variants)):
        got = [val(t, name) for kk, _, t in runs if kk == k and val(t, name) is not None]
        cells.append(statistics.median(got) if got else None)
    print(f"{name:<{w}} " + " ".join(f"{c:8.3f}" if c is not None else f"{'-':>8}" for c in cells))
missing = [f"v{k + 1}:r{r}" for k, r, t in runs if t is None]
if missing:
    print("no report:", " ".join(missing))
with open(f"{out}/ab.csv", "w", newline="") as f:
    wr = csv.writer(f, lineterminator="\n")
    wr.writerow(["variant", "environment", "round", "timer", "seconds"])
    for k, r, t in runs:
        for name in timers:
            x = val(t, name)
            wr.writerow([f"v{k + 1}", variants[k], r, name, "" if x is None else f"{x:.6f}"])
print(f"table: {out}/ab.csv")
PY
exit $status
