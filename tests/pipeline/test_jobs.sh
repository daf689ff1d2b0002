#!/usr/bin/env bash
# jobs/ end to end on the CPU backend: the weak-scaling driver under mpiexec runs a 1- and 2-rank
# series (after touching 1 GiB of memory) and scaling-table.py turns it into a CSV (one row per
# point, efficiency 1 at the base point, documents = ranks x documents per rank) and a PNG
# (matplotlib or the built-in writer);
# ab.sh runs a point under variants of the environment and tabulates them; the SLURM launcher's
# dry run sizes nodes and tasks from the GPU counts; tune.sbatch runs `docmine
# tune` and, with JOB_ARGS, a job's pipeline on one rank (srun stood in for); bad options exit 2.
# usage: test_jobs.sh <docmine>
set -uo pipefail
dm=$1
src=${DOCMINE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
t=$(mktemp -d "${TMPDIR:-/tmp}/docmine-jobs-XXXXXX"); trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && [ "$(wc -c < "$1")" -gt 1000 ]; }

"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 1,2 --methods streamclust --docs-per-gpu 150 --out "$t/weak" \
    --shared-baseline --touch-memory 1 --docmine "$dm" -- --backend cpu --quiet --synth-words 50,100 --synth-topics 3 --k 3,6 --dim 32 > "$t/log" 2>&1 ||
    fail "weak-scaling.sh failed: $(tail -5 "$t/log")"
grep -q "^+ touching 1 GiB of host memory (8 x 128 MiB)" "$t/log" || fail "--touch-memory: no touching line: $(head -3 "$t/log")"
csv=$t/weak/weak-scaling.csv
[ -s "$csv" ] || fail "no CSV"
[ "$(head -1 "$csv" | cut -d, -f1-5)" = "method,gpus,documents,documents_per_gpu,total_s" ] || fail "CSV header: $(head -1 "$csv")"
[ "$(wc -l < "$csv")" -eq 3 ] || fail "CSV: expected 2 points: $(cat "$csv")"
awk -F, 'NR == 2 && !($2 == 1 && $3 == 150 && $4 == 150 && $10 == 1) { exit 1 }
         NR == 3 && !($2 == 2 && $3 == 300 && $4 == 150 && $10 > 0) { exit 1 }' "$csv" || fail "CSV rows: $(cat "$csv")"
is_png "$t/weak/weak-scaling.png" || fail "no PNG plot"
# the shared-host baseline: two concurrent 1-rank runs (rank 0's and rank 1's documents of the
# 2-GPU point), kept out of the series' table
sh=$t/weak/shared-host.csv
[ -s "$sh" ] || fail "no shared-host.csv"
[ "$(head -1 "$sh")" = "method,stage,gpus,alone_s,shared_s,largest_s,efficiency,efficiency_vs_shared,concurrent_runs" ] ||
    fail "shared-host.csv header: $(head -1 "$sh")"
awk -F, 'NR > 1 { n++; if ($1 != "streamclust" || $3 != 2 || $9 != 2 || $5 <= 0 || $6 <= 0) bad = 1
                  if ($8 / ($5 / $6) < 0.999 || $8 / ($5 / $6) > 1.001) bad = 1
                  if ($7 / ($4 / $6) < 0.999 || $7 / ($4 / $6) > 1.001) bad = 1 }
         END { exit (n == 4 && !bad) ? 0 : 1 }' "$sh" || fail "shared-host.csv rows: $(cat "$sh")"
for i in 0 1; do [ -s "$t/weak/.shared/streamclust-r$i/report.json" ] || fail "concurrent run $i: no report"; done
# concurrent run i clusters rank i's documents of the 2-GPU point (--synth-share i/2)
for i in 0 1; do
    cmp -s <(tail -n +2 "$t/weak/.shared/streamclust-r$i/assignments.tsv" | cut -f1) \
           <(tail -n +2 "$t/weak/streamclust-2/assignments.tsv" | sed -n "$((150 * i + 1)),$((150 * i + 150))p" | cut -f1) ||
        fail "concurrent run $i: not the documents of rank $i of the 2-GPU point"
done
python3 "$src/jobs/scaling-table.py" "$t/weak" --builtin-plot --png "$t/builtin.png" --csv "$t/b.csv" > /dev/null || fail "built-in plot failed"
is_png "$t/builtin.png" || fail "built-in PNG writer: not a PNG"
cmp -s "$csv" "$t/b.csv" || fail "the CSV depends on the plotter"

# ab.sh: two variants of the environment alternating over two rounds; each run's report holds
# its variant's environment; the CSV has a row per run and timer
"$src/jobs/ab.sh" --variant "" --variant "DOCMINE_AB_TEST=1 DOCMINE_STAGE_THREADS=2" --gpus 2 --method streamclust \
    --docs-per-gpu 150 --out "$t/ab" --docmine "$dm" --timers pipeline.total,pipeline.tfidf,no.such.timer -- \
    --backend cpu --quiet --synth-words 50,100 --synth-topics 3 --k 3,6 --dim 32 > "$t/ablog" 2>&1 ||
    fail "ab.sh failed: $(tail -5 "$t/ablog")"
for r in 1 2; do
    for k in 1 2; do
        rep=$t/ab/v$k-r$r/streamclust-2/report.json
        got=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["environment"].get("DOCMINE_AB_TEST", "-"))' "$rep" 2>&1)
        want=-; [ $k -eq 2 ] && want=1
        [ "$got" = "$want" ] || fail "ab.sh: v$k round $r: DOCMINE_AB_TEST '$got', expected '$want'"
    done
done
abcsv=$t/ab/ab.csv
[ "$(head -1 "$abcsv")" = "variant,environment,round,timer,seconds" ] || fail "ab.csv header: $(head -1 "$abcsv")"
awk -F, 'NR > 1 { n++; if ($4 == "pipeline.total" && !($5 > 0)) bad = 1; if ($4 == "no.such.timer" && $5 != "") bad = 1 }
         END { exit (n == 12 && !bad) ? 0 : 1 }' "$abcsv" || fail "ab.csv rows: $(cat "$abcsv")"
grep -q "^v2: DOCMINE_AB_TEST=1 DOCMINE_STAGE_THREADS=2" "$t/ablog" || fail "ab.sh: no legend: $(head -8 "$t/ablog")"
"$src/jobs/ab.sh" --variant "" > /dev/null 2>&1; [ $? -eq 2 ] || fail "ab.sh: one variant accepted"
"$src/jobs/ab.sh" --variant "" --variant "NOTANASSIGNMENT" > /dev/null 2>&1; [ $? -eq 2 ] || fail "ab.sh: a variant that is not NAME=VALUE accepted"

dry=$("$src/jobs/weak-scaling.sh" --launcher slurm --dry-run --gpus 1,8 --gpus-per-node 4 --methods flock --out "$t/w") || fail "dry run failed"
printf '%s\n' "$dry" | grep -q -- "--nodes=1 --ntasks-per-node=1 --gpus-per-task=1" || fail "dry run, 1 GPU: $dry"
printf '%s\n' "$dry" | grep -q -- "--nodes=2 --ntasks-per-node=4 --gpus-per-task=1" || fail "dry run, 8 GPUs: $dry"
dry=$("$src/jobs/weak-scaling.sh" --launcher mpiexec --dry-run --gpus 1 --flock-args "--neighbours 30" --streamclust-args "--k 4,8" -- --seed 3) || fail "dry run with method options failed"
printf '%s\n' "$dry" | grep -q -- "--method flock .* --neighbours 30 --seed 3\$" || fail "flock options not on the flock point: $dry"
printf '%s\n' "$dry" | grep -q -- "--method streamclust .* --k 4,8 --seed 3\$" || fail "streamclust options not on the streamclust point: $dry"
printf '%s\n' "$dry" | grep -q -- "--method streamclust.*--neighbours" && fail "flock options reached the streamclust point: $dry"
"$src/jobs/weak-scaling.sh" --launcher slurm --dry-run --gpus 6 --gpus-per-node 4 > /dev/null 2>&1; [ $? -eq 2 ] || fail "6 GPUs on nodes of 4 accepted"
"$src/jobs/weak-scaling.sh" --bogus > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option accepted"
"$src/jobs/weak-scaling.sh" --launcher mpiexec --dry-run --touch-memory 2G > /dev/null 2>&1; [ $? -eq 2 ] || fail "--touch-memory 2G accepted"
python3 "$src/jobs/scaling-table.py" "$t/none" > /dev/null 2>&1; [ $? -eq 2 ] || fail "scaling-table.py: missing directory accepted"
for f in pipeline.sbatch tune.sbatch weak-scaling.sbatch weak-scaling.sh ab.sh; do bash -n "$src/jobs/$f" || fail "$f: syntax"; done
# tune.sbatch under a stand-in srun that logs its arguments: `docmine tune`, then with JOB_ARGS
# one rank's pipeline run of that job with the same tuning mode and database
mkdir -p "$t/shim"; printf '#!/bin/sh\necho "$*" >> "%s/srun.log"\n' "$t" > "$t/shim/srun"; chmod +x "$t/shim/srun"
(cd "$t" && PATH="$t/shim:$PATH" DOCMINE=/x/docmine TUNING_DB="$t/db.tsv" TUNE_MODE=model bash "$src/jobs/tune.sbatch") || fail "tune.sbatch failed"
[ "$(wc -l < "$t/srun.log")" -eq 1 ] && grep -q "^/x/docmine tune --tune model --tuning-db $t/db.tsv --report " "$t/srun.log" ||
    fail "tune.sbatch: $(cat "$t/srun.log")"
rm -f "$t/srun.log"
(cd "$t" && PATH="$t/shim:$PATH" DOCMINE=/x/docmine TUNING_DB="$t/db.tsv" JOB_ARGS="--synthetic default --docs-per-rank 1000 --method flock" \
    bash "$src/jobs/tune.sbatch") || fail "tune.sbatch with JOB_ARGS failed"
[ "$(wc -l < "$t/srun.log")" -eq 2 ] && sed -n 2p "$t/srun.log" |
    grep -q -- "^--ntasks=1 /x/docmine pipeline --tune msp --tuning-db $t/db.tsv --synthetic default --docs-per-rank 1000 --method flock -o .*/run --quiet\$" ||
    fail "tune.sbatch with JOB_ARGS: $(cat "$t/srun.log")"

if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "1 passed, 0 failed"
