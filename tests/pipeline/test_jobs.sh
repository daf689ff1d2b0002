#!/usr/bin/env bash
# jobs/ end to end on the CPU backend: the weak-scaling driver under mpiexec runs a 1- and 2-rank
# series (after touching 1 GiB of memory) and scaling-table.py turns it into a CSV (one row per
# point, efficiency 1 at the base point, documents = ranks x documents per rank) and a PNG
# (matplotlib or the built-in writer);
# ab.sh runs a point under variants of the environment and tabulates them; the SLURM launcher's
# dry run sizes nodes and tasks from the GPU counts; tune.sbatch runs `docmine
# tune` and, with JOB_ARGS, a job's pipeline on one rank (srun stood in for); bad options exit 2.
# Then: a series into a directory holding an older one with a point that fails (the table holds
# the new points only, the failed one marked; exit 1); scaling-table.py on mixed series, broken
# reports and a failed baseline; the shared-host table of this series' concurrent runs only;
# printed commands that run as printed; ab.sh's bad options; the SLURM launcher end to end under
# stand-ins for sbatch and srun; bench/flock/weak_scaling.sh, datasets/fetch.sh (Reuters: the
# folder holds each article once), scripts/demo.sh, coverage.sh and gpu-check.sh under stand-ins
# (no network, no GPU).
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
# pipeline.sbatch and weak-scaling.sbatch: srun ends the job when a rank fails, takes sbatch's
# cores per task (SRUN_CPUS_PER_TASK, which srun of SLURM 22.05-23.02 needs), and ARGS arrive
# unglobbed (a '*' among files stayed a '*')
printf '#!/bin/sh\necho "SRUN_CPUS_PER_TASK=${SRUN_CPUS_PER_TASK:-} $*" >> "%s/srun.log"\n' "$t" > "$t/shim/srun"
touch "$t/globbed-a" "$t/globbed-b"
for job in pipeline weak-scaling; do
    rm -f "$t/srun.log"
    (cd "$t" && PATH="$t/shim:$PATH" DOCMINE=/x/docmine SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=7 ARGS="--stopwords glob*" \
        bash "$src/jobs/$job.sbatch") || fail "$job.sbatch failed"
    grep -q -- "^SRUN_CPUS_PER_TASK=7 --kill-on-bad-exit=1 /x/docmine pipeline .* --stopwords glob\*\$" "$t/srun.log" ||
        fail "$job.sbatch: $(cat "$t/srun.log")"
done
rm -f "$t/srun.log" "$t"/globbed-*

# --- a series into a directory that holds an older one, with a point that fails ---------------
# (a path with spaces; the older series: 150 documents per GPU on 1, 2 and 4 GPUs; the new one:
# 100 per GPU on 1 and 2 GPUs, whose 2-rank run fails). The table holds the new series' points
# only, the failed one marked, and the driver says so with exit 1.
st="$t/stale dir"; mkdir -p "$st"
for g in 1 2; do cp -r "$t/weak/streamclust-$g" "$st/"; done; cp -r "$t/weak/streamclust-2" "$st/streamclust-4"
printf '#!/bin/sh\n[ "${PMI_SIZE:-1}" -eq 2 ] && { echo "stand-in failure" >&2; exit 3; }\nexec "%s" "$@"\n' "$dm" > "$t/flaky"
chmod +x "$t/flaky"
sargs=(--backend cpu --quiet --synth-words "50,100" --synth-topics 3 --k "3,6" --dim 32)
"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 1,2 --methods streamclust --docs-per-gpu 100 --out "$st" --docmine "$t/flaky" -- \
    "${sargs[@]}" > "$t/stlog" 2>&1
rc=$?; [ $rc -eq 1 ] || fail "series with a failed point: exit $rc, expected 1: $(tail -3 "$t/stlog")"
grep -q "streamclust-2 failed" "$t/stlog" || fail "no message for the failed point: $(tail -5 "$t/stlog")"
grep -q "stand-in failure" "$st/streamclust-2.log" || fail "the failed point's log lacks its error: $(cat "$st/streamclust-2.log")"
[ ! -e "$st/streamclust-2/report.json" ] || fail "the older series' 2-GPU report survived the failed point"
stcsv=$st/weak-scaling.csv
[ "$(wc -l < "$stcsv" 2>/dev/null)" = 3 ] || fail "stale series: expected the 2 points of the new series: $(cat "$stcsv" 2>&1)"
awk -F, 'NR == 2 && !($2 == 1 && $3 == 100 && $10 == 1 && $15 == "ok") { exit 1 }
         NR == 3 && !($2 == 2 && $10 == "nan" && $15 == "no report.json") { exit 1 }' "$stcsv" ||
    fail "stale series rows: $(cat "$stcsv")"
grep -q "FAILED: no report.json" "$t/stlog" || fail "the printed table does not mark the failed point: $(tail -6 "$t/stlog")"
# --repeats: every run of a point failing leaves no report, and the series goes on
"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 2,1 --repeats 2 --methods streamclust --docs-per-gpu 100 --out "$t/rep" \
    --docmine "$t/flaky" -- "${sargs[@]}" > "$t/replog" 2>&1
rc=$?; [ $rc -eq 1 ] || fail "--repeats 2 with a failing point: exit $rc: $(tail -3 "$t/replog")"
[ -s "$t/rep/streamclust-1/report.json" ] && grep -q "stand-in failure" "$t/rep/streamclust-2.log" &&
    [ -z "$(find "$t/rep" -name '.*')" ] || fail "--repeats 2 with a failing point: $(ls -A "$t/rep")"

# a run that exits with an error fails the series even where it wrote its report (here the extra
# copy of the report, --report, cannot be written), with --repeats too; so does a concurrent run
# of --shared-baseline that fails
for rp in 1 2; do
    "$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 1 --repeats $rp --methods streamclust --docs-per-gpu 100 --out "$t/rx" \
        --docmine "$dm" -- "${sargs[@]}" --report "$t/no-such-dir/r.json" > "$t/rxlog" 2>&1
    rc=$?; [ $rc -eq 1 ] || fail "--repeats $rp, a run that exits with an error after its report: exit $rc, expected 1"
done
printf '#!/bin/sh\ncase " $* " in *" 1/2 "*) echo "stand-in failure" >&2; exit 3 ;; esac\nexec "%s" "$@"\n' "$dm" > "$t/flaky2"
chmod +x "$t/flaky2"
"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 1,2 --methods streamclust --docs-per-gpu 100 --out "$t/sx" --shared-baseline \
    --docmine "$t/flaky2" -- "${sargs[@]}" > "$t/sxlog" 2>&1
rc=$?; [ $rc -eq 1 ] && grep -q "concurrent 1-GPU run of streamclust failed" "$t/sxlog" ||
    fail "a failed concurrent run of --shared-baseline: exit $rc, expected 1: $(tail -3 "$t/sxlog")"

# --- scaling-table.py on its own ---------------------------------------------------------------
# a series of another number of documents per GPU (a 1-GPU point at 100 per GPU, in 'a-1') is
# not the baseline of the 150-per-GPU series; a truncated report is a FAILED row (exit 1); a
# report without timers is a row without time
mx=$t/mixed; mkdir -p "$mx"
cp -r "$t/weak/streamclust-1" "$t/weak/streamclust-2" "$mx/"; cp -r "$st/streamclust-1" "$mx/a-1"
python3 "$src/jobs/scaling-table.py" "$mx" --csv "$t/mx.csv" --png "$t/mx.png" > "$t/mxlog" 2>&1 || fail "mixed series: $(tail -3 "$t/mxlog")"
want=$(python3 -c 'import json, sys; t = [json.load(open(f))["timers_s"]["pipeline.total"]["max"] for f in sys.argv[1:]]; print(t[0] / t[1])' \
    "$mx/streamclust-1/report.json" "$mx/streamclust-2/report.json")
awk -F, -v w="$want" '$2 == 2 { n++; if ($10 / w < 0.999 || $10 / w > 1.001) bad = 1 } $2 == 1 && $10 != 1 { bad = 1 }
                      END { exit (n == 1 && !bad) ? 0 : 1 }' "$t/mx.csv" ||
    fail "mixed series: the 2-GPU efficiency is not against the 1-GPU point of 150 per GPU ($want): $(cat "$t/mx.csv")"
mkdir -p "$mx/streamclust-4"; head -c 200 "$mx/streamclust-2/report.json" > "$mx/streamclust-4/report.json"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); del r["timers_s"]; json.dump(r, open(sys.argv[2], "w"))' \
    "$mx/a-1/report.json" "$mx/a-1/r.json" && mv "$mx/a-1/r.json" "$mx/a-1/report.json"
python3 "$src/jobs/scaling-table.py" "$mx" --csv "$t/mx.csv" --png "$t/mx.png" > "$t/mxlog" 2>&1
rc=$?; [ $rc -eq 1 ] || fail "scaling-table.py with a truncated report: exit $rc, expected 1"
grep -q '^streamclust,4,.*,unreadable report.json' "$t/mx.csv" || fail "truncated report: no FAILED row: $(cat "$t/mx.csv")"
grep -q '^streamclust,1,100,100,nan,.*,no pipeline.total timer$' "$t/mx.csv" || fail "report without timers: $(cat "$t/mx.csv")"
# --points: a point named without a report is a FAILED row (exit 1); when it is the series'
# smallest point, the series has no efficiency (it is not taken against the next point)
rm -rf "$t/nobase"; mkdir -p "$t/nobase"; cp -r "$t/weak/streamclust-2" "$t/nobase/"
python3 "$src/jobs/scaling-table.py" "$t/nobase" --points streamclust-1,streamclust-2 --csv "$t/nb.csv" --png "$t/nb.png" > /dev/null 2>&1
rc=$?; [ $rc -eq 1 ] || fail "--points with a missing point: exit $rc, expected 1"
awk -F, 'NR == 2 && !($2 == 1 && $15 == "no report.json") { exit 1 } NR == 3 && !($2 == 2 && $10 == "nan") { exit 1 }
         END { exit NR == 3 ? 0 : 1 }' "$t/nb.csv" 2>/dev/null || fail "failed baseline: $(cat "$t/nb.csv" 2>&1)"
python3 "$src/jobs/scaling-table.py" "$t/weak" --points flock-x > /dev/null 2>&1; [ $? -eq 2 ] || fail "--points flock-x accepted"

# --- the shared-host table holds this series' concurrent runs only ------------------------------
# a series run without --shared-baseline into a directory that holds an older series' concurrent
# runs (of the same documents per GPU) writes no shared-host table from them
cp -r "$t/weak" "$t/wsh"
"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus 1,2 --methods streamclust --docs-per-gpu 150 --out "$t/wsh" \
    --docmine "$dm" -- "${sargs[@]}" > "$t/wshlog" 2>&1 || fail "series over an older shared baseline: $(tail -3 "$t/wshlog")"
[ ! -e "$t/wsh/shared-host.csv" ] && ! grep -q "^shared host" "$t/wshlog" ||
    fail "a series without --shared-baseline tabulated an older series' concurrent runs: $(cat "$t/wsh/shared-host.csv" 2>&1)"
[ -z "$(ls "$t/wsh/.shared" 2>/dev/null)" ] || fail "an older series' concurrent runs were left: $(ls "$t/wsh/.shared")"
# concurrent runs of the shares of 4 GPUs are no baseline for a 2-GPU largest point
mkdir -p "$t/shm/.shared"; cp -r "$t/weak/streamclust-1" "$t/weak/streamclust-2" "$t/shm/"
for i in 0 1 2 3; do
    mkdir -p "$t/shm/.shared/streamclust-r$i"
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["results"]["input"]["share"] = sys.argv[3]
json.dump(r, open(sys.argv[2], "w"))' "$t/weak/.shared/streamclust-r$((i % 2))/report.json" \
        "$t/shm/.shared/streamclust-r$i/report.json" "$i/4"
done
python3 "$src/jobs/scaling-table.py" "$t/shm" > "$t/shmlog" 2>&1 || fail "table beside runs of 4 shares: $(tail -3 "$t/shmlog")"
[ ! -e "$t/shm/shared-host.csv" ] || fail "runs of the shares of 4 GPUs taken as the 2-GPU point's baseline: $(cat "$t/shm/shared-host.csv")"
# --points: a point of 0 GPUs is a bad argument; a report without its ranks is a FAILED row and
# the plot is still drawn
python3 "$src/jobs/scaling-table.py" "$t/weak" --points streamclust-1,streamclust-0 --csv "$t/z.csv" --png "$t/z.png" > "$t/zlog" 2>&1
rc=$?; [ $rc -eq 2 ] || fail "scaling-table.py --points streamclust-0: exit $rc, expected 2: $(tail -2 "$t/zlog")"
mkdir -p "$t/nr"; cp -r "$t/weak/streamclust-1" "$t/weak/streamclust-2" "$t/nr/"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); del r["ranks"]; json.dump(r, open(sys.argv[1], "w"))' \
    "$t/nr/streamclust-2/report.json"
python3 "$src/jobs/scaling-table.py" "$t/nr" --points streamclust-1,streamclust-2 --builtin-plot > "$t/nrlog" 2>&1
rc=$?; [ $rc -eq 1 ] && is_png "$t/nr/weak-scaling.png" && grep -q '^streamclust,2,.*,no ranks in report.json$' "$t/nr/weak-scaling.csv" ||
    fail "report without ranks: exit $rc: $(tail -2 "$t/nrlog"; cat "$t/nr/weak-scaling.csv" 2>&1)"
# ab.sh refuses what weak-scaling.sh would refuse in every run, before running any
for o in "--docs-per-gpu x" "--touch-memory 2G" "--cores-per-rank 0" "--bind-order bogus"; do
    # shellcheck disable=SC2086 # o is a list of options
    timeout 60 "$src/jobs/ab.sh" --variant "" --variant "A=1" --gpus 1 --rounds 1 --out "$t/abbad" --docmine "$dm" \
        --method streamclust --docs-per-gpu 100 $o -- "${sargs[@]}" > "$t/badlog" 2>&1
    rc=$?; [ $rc -eq 2 ] && [ ! -e "$t/abbad" ] || fail "ab.sh $o: exit $rc, expected 2 before any run: $(tail -2 "$t/badlog")"
done

# --- printed commands run as printed: the dry run's point under mpiexec (its binder script, its
# CPU blocks "0;1", an output path with a space and a quote) and, from a checkout whose path has a
# space, the table command the SLURM launcher prints --------------------------------------------
pq="$t/it's a dir"
line=$("$src/jobs/weak-scaling.sh" --launcher mpiexec --dry-run --gpus 2 --methods streamclust --docs-per-gpu 100 --out "$pq" \
       --docmine "$dm" --cores-per-rank 1 -- "${sargs[@]}" | grep '^+ env')
(cd "$t" && eval "${line#+ }") > "$t/evlog" 2>&1
[ -s "$pq/streamclust-2/report.json" ] || fail "the dry run's command does not run as printed: $line: $(tail -3 "$t/evlog")"
mkdir -p "$t/re po"; cp -r "$src/jobs" "$t/re po/"
hint=$("$t/re po/jobs/weak-scaling.sh" --launcher slurm --dry-run --gpus 1,2 --methods streamclust --out "$t/weak" |
       sed -n 's/^when the jobs have finished: //p')
eval "python3 $hint --csv '$t/h.csv' --png '$t/h.png'" > "$t/hlog" 2>&1 && [ "$(wc -l < "$t/h.csv")" -eq 3 ] ||
    fail "the table command printed from a path with a space: '$hint': $(tail -2 "$t/hlog")"

# --- bad driver options exit 2 before anything runs ---------------------------------------------
for o in "--gpus 1,1" "--gpus 0" "--gpus 1,x" "--gpus ," "--methods flock,flock" "--methods flock,bogus" "--repeats 0" \
         "--docs-per-gpu 0" "--out" "--gpus" "--docmine $t/no-such-docmine"; do
    # shellcheck disable=SC2086 # o is a list of options
    rm -rf "$t/bad"
    timeout 120 "$src/jobs/weak-scaling.sh" --launcher mpiexec --docmine "$dm" --out "$t/bad" --gpus 1 --docs-per-gpu 100 $o > "$t/badlog" 2>&1
    rc=$?; [ $rc -eq 2 ] || fail "weak-scaling.sh $o: exit $rc, expected 2: $(tail -2 "$t/badlog")"
    [ -z "$(ls -A "$t/bad" 2>/dev/null)" ] || fail "weak-scaling.sh $o: a point ran"
done
# under SLURM an option reaches the jobs through ARGS, which is split at white space: refused
"$src/jobs/weak-scaling.sh" --launcher slurm --dry-run --gpus 1 --out "$t/w" -- --stopwords "$t/a b" > "$t/badlog" 2>&1
rc=$?; [ $rc -eq 2 ] || fail "SLURM launcher: an option with a space would be split in the jobs, yet exit $rc: $(tail -2 "$t/badlog")"
"$src/jobs/weak-scaling.sh" --launcher mpiexec --gpus > "$t/badlog" 2>&1
grep -q "^weak-scaling.sh: --gpus needs a value" "$t/badlog" || fail "--gpus without a value: $(cat "$t/badlog")"
"$src/jobs/ab.sh" --variant "" --variant > "$t/badlog" 2>&1
[ $? -eq 2 ] && grep -q "needs a value" "$t/badlog" || fail "ab.sh --variant without a value: $(cat "$t/badlog")"

# --- the SLURM launcher under stand-ins: sbatch splits --export=ALL,NAME=VALUE,... at every
# comma (as SLURM does) and runs the job at once; srun is mpiexec -------------------------------
mkdir -p "$t/slurm"
cat > "$t/slurm/sbatch" <<'SBATCH'
#!/usr/bin/env bash
n=1; per=1; exp=ALL; script=""
for a in "$@"; do
    case $a in
    --nodes=*) n=${a#*=} ;; --ntasks-per-node=*) per=${a#*=} ;; --export=*) exp=${a#*=} ;; -*) ;;
    *) [ -n "$script" ] || script=$a ;;
    esac
done
IFS=, read -r -a kv <<< "$exp"
for x in "${kv[@]:1}"; do [[ $x == *=* ]] && export "${x?}"; done
echo "ARGS=${ARGS:-}" >> "$SLURM_STUB_LOG"
id=$RANDOM
SLURM_NTASKS=$((n * per)) SLURM_NTASKS_PER_NODE=$per SLURM_JOB_ID=$id bash "$script" > "$(dirname "$SLURM_STUB_LOG")/job-$id.out" 2>&1
echo "$id"
SBATCH
# srun: its own options logged and dropped (a job whose rank fails must not keep its GPUs until
# the time limit: --kill-on-bad-exit=1 ends the other ranks)
cat > "$t/slurm/srun" <<'SRUN'
#!/usr/bin/env bash
while [ "${1#--}" != "$1" ]; do echo "srun $1" >> "$SLURM_STUB_LOG"; shift; done
exec mpiexec -n "$SLURM_NTASKS" "$@"
SRUN
chmod +x "$t/slurm/sbatch" "$t/slurm/srun"
mkdir -p "$t/sl"; cp -r "$t/weak/streamclust-2" "$t/sl/streamclust-4"   # an older series' point
PATH="$t/slurm:$PATH" SLURM_STUB_LOG="$t/sbatch.log" "$src/jobs/weak-scaling.sh" --launcher slurm --gpus 1,2 --gpus-per-node 2 \
    --methods streamclust --docs-per-gpu 120 --out "$t/sl" --docmine "$dm" --streamclust-args "--k 3,6" -- \
    --backend cpu --quiet --synth-words 50,100 --synth-topics 3 --dim 32 > "$t/sllog" 2>&1 || fail "SLURM launcher: $(tail -3 "$t/sllog")"
[ "$(grep -c -- '--k 3,6 --backend cpu --quiet --synth-words 50,100 --synth-topics 3 --dim 32$' "$t/sbatch.log")" = 2 ] ||
    fail "SLURM launcher: the jobs' ARGS: $(cat "$t/sbatch.log")"
[ "$(grep -c -- '^srun --kill-on-bad-exit=1$' "$t/sbatch.log")" = 2 ] ||
    fail "SLURM launcher: the jobs' srun without --kill-on-bad-exit=1: $(cat "$t/sbatch.log")"
for g in 1 2; do [ -s "$t/sl/streamclust-$g/report.json" ] || fail "SLURM launcher: no report of point $g: $(cat "$t"/job-*.out)"; done
hint=$(sed -n 's/^when the jobs have finished: //p' "$t/sllog")
[ -n "$hint" ] && eval "python3 $hint --csv '$t/sl.csv' --png '$t/sl.png'" > /dev/null 2>&1 || fail "SLURM launcher: the table command: '$hint'"
[ "$(cut -d, -f2,4 "$t/sl.csv" 2>&1 | tail -n +2 | paste -sd' ')" = "1,120 2,120" ] || fail "SLURM series table: $(cat "$t/sl.csv" 2>&1)"

# --- bench/flock/weak_scaling.sh: a failed or skipped run leaves no older files behind ----------
mkdir -p "$t/bw/bench/flock"
cat > "$t/bw/bench/flock/bench_flock" <<'BENCH'
#!/usr/bin/env bash
# stand-in: rank 0 logs its arguments, writes --json and prints the lines weak_scaling.sh reads
[ "${PMI_RANK:-0}" = 0 ] || exit 0
echo "$*" >> "$BW_LOG"
[ "${PMI_SIZE:-1}" != "${BW_FAIL:-x}" ] || exit 3
json=""; prev=""; for a in "$@"; do [ "$prev" != --json ] || json=$a; prev=$a; done
echo '{}' > "$json"
echo "flock benchmark: 10 documents"; echo "run 1.0 s (${BW_MS:-5.0} ms/iteration)"
BENCH
chmod +x "$t/bw/bench/flock/bench_flock"
BW_LOG=$t/bw.log FLOCK_WEAK_GPUS=2 "$src/bench/flock/weak_scaling.sh" "$t/bw" "$t/bwout" 10 2 "1 2" > /dev/null 2>&1 || fail "bench weak_scaling.sh"
echo "old" > "$t/bwout/flock_weak_4.txt"
rm -f "$t/bw.log"
BW_LOG=$t/bw.log BW_FAIL=1 BW_MS=7.0 FLOCK_WEAK_GPUS=2 "$src/bench/flock/weak_scaling.sh" "$t/bw" "$t/bwout" 10 2 "1 2 4" > "$t/bwlog" 2>&1
grep -q -- "--baseline" "$t/bw.log" && fail "bench weak_scaling.sh: the failed 1-rank run's older JSON was the baseline: $(cat "$t/bw.log")"
grep -q '^1 .*5\.0' "$t/bwout/weak_scaling.txt" && fail "bench weak_scaling.sh: the failed 1-rank run's older time in the table"
grep -q '^4 ' "$t/bwout/weak_scaling.txt" && fail "bench weak_scaling.sh: a skipped rank count's older file in the table: $(cat "$t/bwout/weak_scaling.txt")"

# --- datasets/fetch.sh under a stand-in curl: no network, a wrong checksum, a corrupt Reuters
# archive, an unknown name -----------------------------------------------------------------------
mkdir -p "$t/net/bin" "$t/net/srv" "$t/net/bad"
cat > "$t/net/bin/curl" <<'CURL'
#!/bin/sh
# stand-in curl: FETCH_SRV/<the URL's file name>; FETCH_FAIL: no network, after writing a part
out=""; url=""
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; -*) shift ;; *) url=$1; shift ;; esac; done
[ -z "${FETCH_FAIL:-}" ] || { printf 'part' > "$out"; echo "curl: (6) Could not resolve host" >&2; exit 6; }
cp "$FETCH_SRV/${url##*/}" "$out"
CURL
chmod +x "$t/net/bin/curl"
fetch() { PATH="$t/net/bin:$PATH" "$src/datasets/fetch.sh" "$@"; }
FETCH_FAIL=1 fetch bbc "$t/net/d s" > "$t/flog" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "^fetch: downloading .* failed" "$t/flog" || fail "fetch.sh without network: exit $rc: $(cat "$t/flog")"
[ -z "$(ls -A "$t/net/d s/bbc")" ] || fail "fetch.sh without network left: $(ls -A "$t/net/d s/bbc")"
printf 'not the archive' > "$t/net/bad/bbc-fulltext.zip"
for i in 1 2; do   # twice: a rerun downloads again rather than stopping at the bad file
    FETCH_SRV=$t/net/bad fetch bbc "$t/net/d s" > "$t/flog" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "sha256 mismatch" "$t/flog" || fail "fetch.sh, wrong checksum (run $i): exit $rc: $(cat "$t/flog")"
done
[ -z "$(ls -A "$t/net/d s/bbc")" ] || fail "fetch.sh, wrong checksum, left: $(ls -A "$t/net/d s/bbc")"
fetch nosuch "$t/net/d s" > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && [ ! -e "$t/net/d s/nosuch" ] || fail "fetch.sh nosuch: exit $rc, or it made its folder"
fetch > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "fetch.sh without a corpus name: exit $rc, not 2 (usage)"
# 20 Newsgroups and BBC, their archives made here (a stand-in sha256sum passes them): the line
# printed starts with the path to give to --corpus, that folder holds the documents, and a
# second run finds the corpus in place (no download)
mkdir -p "$t/net/sum" "$t/net/mk/20news-bydate-train/alt.atheism" "$t/net/mk/20news-bydate-test/alt.atheism" "$t/net/mk/bbc/tech"
printf '#!/bin/sh\n[ "$1" = -c ] && { cat > /dev/null; exit 0; }\nexec "%s" "$@"\n' "$(command -v sha256sum)" > "$t/net/sum/sha256sum"
chmod +x "$t/net/sum/sha256sum"
echo "god exists" > "$t/net/mk/20news-bydate-train/alt.atheism/1"; echo "or not" > "$t/net/mk/20news-bydate-test/alt.atheism/2"
echo "chips" > "$t/net/mk/bbc/tech/001.txt"
tar -czf "$t/net/srv/20news-bydate.tar.gz" -C "$t/net/mk" 20news-bydate-train 20news-bydate-test
(cd "$t/net/mk" && python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z: z.write("bbc/tech/001.txt")' "$t/net/srv/bbc-fulltext.zip")
for c in 20newsgroups:alt.atheism/1 bbc:tech/001.txt; do
    for run in 1 2; do   # the second without network: nothing is downloaded again
        FETCH_FAIL=$([ $run -eq 2 ] && echo 1) FETCH_SRV=$t/net/srv PATH="$t/net/sum:$PATH" fetch "${c%%:*}" "$t/net/ok" > "$t/flog" 2>&1
        rc=$?; p=$(sed -n 's/   (docmine .*//p' "$t/flog")
        [ $rc -eq 0 ] && [ -f "$p/${c#*:}" ] ||
            fail "fetch.sh ${c%%:*} (run $run): exit $rc; the corpus path printed, '$p', does not hold ${c#*:}: $(cat "$t/flog")"
    done
done
reuters=${DOCMINE_DATASETS:-$src/../shared/datasets}/reuters21578
if [ -f "$reuters/reut2-000.sgm.gz" ] || [ -f "$reuters/reut2-000.sgm" ]; then
    for f in "$reuters"/reut2-*.sgm*; do
        b=$(basename "$f" .gz)
        if [ "$b" != "$(basename "$f")" ]; then gzip -dc "$f" > "$t/net/srv/$b"; else cp "$f" "$t/net/srv/"; fi
    done
    (cd "$t/net/srv" && tar -czf reuters21578.tar.gz reut2-*.sgm)
    cp "$t"/net/srv/reut2-*.sgm "$t/net/bad/"; echo "changed" >> "$t/net/bad/reut2-007.sgm"
    (cd "$t/net/bad" && tar -czf reuters21578.tar.gz reut2-*.sgm)
    FETCH_SRV=$t/net/bad fetch reuters21578 "$t/net/d s" > "$t/flog" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "extracted files do not match" "$t/flog" || fail "fetch.sh, corrupt Reuters: exit $rc: $(tail -2 "$t/flog")"
    [ -z "$(ls -A "$t/net/d s/reuters21578")" ] || fail "fetch.sh, corrupt Reuters, left: $(ls -A "$t/net/d s/reuters21578" | head -3)"
    FETCH_SRV=$t/net/srv fetch reuters21578 "$t/net/d s" > "$t/flog" 2>&1 || fail "fetch.sh Reuters after a failed fetch: $(tail -2 "$t/flog")"
    grep -q "^$t/net/d s/reuters21578   (docmine ... --corpus" "$t/flog" || fail "fetch.sh Reuters: $(cat "$t/flog")"
    FETCH_FAIL=1 fetch reuters21578 "$t/net/d s" > "$t/flog" 2>&1 || fail "fetch.sh Reuters in place: it downloaded again"
    # the corpus folder holds the articles once: `--format reuters` reads archives too, so the
    # archive must not stay beside the .sgm files (nor one an older fetch left there)
    nd() { "$dm" --backend cpu preprocess --corpus "$t/net/d s/reuters21578" --format reuters -o "$t/net/tok" 2>&1 |
           sed -n 's/^docmine preprocess: \([0-9]*\) documents.*/\1/p'; }
    [ "$(nd)" = 21578 ] || fail "fetch.sh Reuters: the corpus folder does not hold 21578 articles: $(nd); $(ls "$t/net/d s/reuters21578")"
    cp "$t/net/srv/reuters21578.tar.gz" "$t/net/d s/reuters21578/"
    FETCH_FAIL=1 fetch reuters21578 "$t/net/d s" > "$t/flog" 2>&1 && [ ! -e "$t/net/d s/reuters21578/reuters21578.tar.gz" ] ||
        fail "fetch.sh Reuters in place: an older fetch's archive stayed in the corpus folder"
else
    echo "(no Reuters copy under $reuters: fetch.sh's Reuters cases skipped)"
fi

# --- scripts/ under stand-ins (cmake, ctest, gcovr, mpiexec; nvidia-smi that finds no GPU):
# demo.sh with --method streamclust, coverage.sh with ctest arguments only, gpu-check.sh ---------
sc=$t/sc; mkdir -p "$sc/bin" "$sc/repo/scripts" "$sc/repo/build-cpu/apps" "$sc/repo/build/apps"
cp "$src/scripts/demo.sh" "$src/scripts/coverage.sh" "$src/scripts/gpu-check.sh" "$sc/repo/scripts/"
ln -s "$dm" "$sc/repo/build-cpu/apps/docmine"; ln -s "$dm" "$sc/repo/build/apps/docmine"
printf '#!/bin/sh\nexit 9\n' > "$sc/bin/nvidia-smi"
for c in cmake ctest gcovr mpiexec; do
    printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\n[ %s != ctest ] || echo "100%% tests passed"\n' "$c" "$sc" "$c" > "$sc/bin/$c"
done
chmod +x "$sc"/bin/*
PATH="$sc/bin:$PATH" "$sc/repo/scripts/demo.sh" --method streamclust --synthetic 300 --backend cpu --quiet --k 3,6 > "$t/demolog" 2>&1 ||
    fail "demo.sh --method streamclust: $(tail -3 "$t/demolog")"
[ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"]["method"])' "$sc/repo/out/demo/report.json" 2>&1)" = streamclust ] ||
    fail "demo.sh --method streamclust: no streamclust report"
rm -f "$sc/calls"; mkdir -p "$sc/repo/build-coverage"   # what the stand-in cmake does not make
PATH="$sc/bin:$PATH" "$sc/repo/scripts/coverage.sh" -R flock > "$t/covlog" 2>&1 || fail "coverage.sh -R flock: $(tail -3 "$t/covlog")"
grep -q "^ctest --preset coverage -j [0-9]* -R flock$" "$sc/calls" && [ -d "$sc/repo/build-coverage/report" ] ||
    fail "coverage.sh -R flock: $(cat "$sc/calls" 2>&1)"
PATH="$sc/bin:$PATH" "$sc/repo/scripts/gpu-check.sh" "$sc/gc" --quick > "$t/gclog" 2>&1 || fail "gpu-check.sh without a GPU: exit $?"
grep -q "^info --bandwidth (ranks=2)" "$sc/gc/summary.txt" 2>/dev/null && [ -s "$sc/gc/logs.tar.gz" ] ||
    fail "gpu-check.sh without a GPU: $(tail -3 "$t/gclog")"
(cd "$sc" && PATH="$sc/bin:$PATH" "$sc/repo/scripts/gpu-check.sh" --quick > /dev/null 2>&1); rc=$?
[ $rc -eq 2 ] && [ ! -e "$sc/repo/--quick" ] || fail "gpu-check.sh --quick (no OUTDIR): exit $rc"

if [ $fails -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "1 passed, 0 failed"
