#!/usr/bin/env bash
# `docmine flock` end to end (CPU backend): outputs exist and are well-formed, 1 and 3 ranks write
# identical assignments, positions and clusters (top terms), an interrupted run resumed from its
# checkpoint writes the same outputs (and says so in its report), the last iteration's checkpoint is
# written, --snapshot-every writes a PNG series, a folder used again keeps no earlier run's outputs
# of flock's names, a checkpoint that would replace another file or lies in a missing folder is
# refused before the run, a resume with another option names it, and bad options exit with 2.
set -euo pipefail
dm=$1; mpiexec=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=1
common=(--backend cpu --synth 500 --synth-topics 4 --synth-tokens 120 --threshold 0.06 --iterations 40 --seed 5 --quiet)
fail() { echo "FAIL: $*"; exit 1; }

"$dm" flock "${common[@]}" -o "$t/one" > "$t/one.out"
for f in assignments.tsv clusters.tsv positions.csv flock.png flock-labels.png report.json; do
  [ -s "$t/one/$f" ] || fail "missing $f"
done
[ "$(wc -l < "$t/one/assignments.tsv")" -eq 501 ] || fail "assignments.tsv has the wrong number of lines"
[ "$(wc -l < "$t/one/positions.csv")" -eq 501 ] || fail "positions.csv has the wrong number of lines"
head -1 "$t/one/assignments.tsv" | grep -q "^doc	label	cluster$" || fail "assignments.tsv header"
head -1 "$t/one/clusters.tsv" | grep -q "^cluster	size	top_terms	weights$" || fail "clusters.tsv header"
grep -q '"nmi"' "$t/one/report.json" || fail "no NMI in report.json"
grep -q '^flock: 500 documents' "$t/one.out" || fail "summary line"
# sizes in clusters.tsv add up to the documents
sum=$(awk -F'\t' 'NR>1 {s+=$2} END {print s}' "$t/one/clusters.tsv")
[ "$sum" -eq 500 ] || fail "cluster sizes sum to $sum"

"$mpiexec" -n 3 "$dm" flock "${common[@]}" -o "$t/three" > /dev/null
cmp "$t/one/assignments.tsv" "$t/three/assignments.tsv" || fail "assignments differ between 1 and 3 ranks"
cmp "$t/one/positions.csv" "$t/three/positions.csv" || fail "positions differ between 1 and 3 ranks"
# top terms: exact sums, the owners' records merged from 3 sorted runs
cmp "$t/one/clusters.tsv" "$t/three/clusters.tsv" || fail "clusters.tsv differs between 1 and 3 ranks"
# the pictures: every rank draws its own boids, rank 0 gets the union
cmp "$t/one/flock.png" "$t/three/flock.png" || fail "flock.png differs between 1 and 3 ranks"
cmp "$t/one/flock-labels.png" "$t/three/flock-labels.png" || fail "flock-labels.png differs between 1 and 3 ranks"

# the row writers format chunks of 4096 rows in parallel and append them in order: 9000 documents
# on 1 rank (3 chunks) with 1 and 3 threads and on 3 ranks (one chunk each) write the same bytes;
# the 3 ranks run 2 threads each: one packs the initial distribution's items (5 rows each under
# ctest) while the master thread posts each destination's messages and drives MPI
big=(--backend cpu --synth 9000 --synth-topics 4 --synth-tokens 30 --threshold 0.06 --iterations 2 --seed 5 --quiet)
"$dm" flock "${big[@]}" -o "$t/big1" > /dev/null
OMP_NUM_THREADS=3 "$dm" flock "${big[@]}" -o "$t/big3t" > /dev/null
OMP_NUM_THREADS=2 "$mpiexec" -n 3 "$dm" flock "${big[@]}" -o "$t/big3r" > /dev/null
[ "$(wc -l < "$t/big1/positions.csv")" -eq 9001 ] || fail "9000 documents: positions.csv has the wrong number of lines"
for f in assignments.tsv positions.csv clusters.tsv flock.png; do
  cmp "$t/big1/$f" "$t/big3t/$f" || fail "$f differs between 1 and 3 threads"
  cmp "$t/big1/$f" "$t/big3r/$f" || fail "$f differs between 1 and 3 ranks (9000 documents)"
done

# a run on 2 ranks leaves a checkpoint at iteration 20 (as if killed after it); resuming it on 1 rank
# must write the same files as the uninterrupted run
"$mpiexec" -n 2 "$dm" flock "${common[@]}" -o "$t/ck" --checkpoint-every 20 > /dev/null
[ -s "$t/ck/flock.ckpt" ] || fail "no checkpoint written"
rm "$t/ck/assignments.tsv" "$t/ck/positions.csv"
"$dm" flock "${common[@]}" -o "$t/ck" --resume > /dev/null
cmp "$t/one/assignments.tsv" "$t/ck/assignments.tsv" || fail "resumed assignments differ"
cmp "$t/one/positions.csv" "$t/ck/positions.csv" || fail "resumed positions differ"

# killed for real (SIGKILL) after its first checkpoint, then resumed: the same outputs
long=(--backend cpu --synth 500 --synth-topics 4 --synth-tokens 120 --threshold 0.06 --iterations 120 --seed 5 --quiet)
"$dm" flock "${long[@]}" -o "$t/full" > /dev/null
"$dm" flock "${long[@]}" -o "$t/kill" --checkpoint-every 10 > /dev/null &
pid=$!
for _ in $(seq 1 600); do [ -s "$t/kill/flock.ckpt" ] && break; sleep 0.1; done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ -s "$t/kill/flock.ckpt" ] || fail "no checkpoint before the kill"
"$dm" flock "${long[@]}" -o "$t/kill" --checkpoint-every 10 --resume > /dev/null
cmp "$t/full/positions.csv" "$t/kill/positions.csv" || fail "positions differ after kill and resume"
cmp "$t/full/assignments.tsv" "$t/kill/assignments.tsv" || fail "assignments differ after kill and resume"
# its report: the iteration it resumed from, and the throughput of the iterations it ran (not of
# all 120 in the time of the last ones)
python3 - "$t/kill/report.json" <<'PY' || fail "report after resume"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
start, run = r["resumed_from_iteration"], r["iterations_run"]
assert 0 < start <= 120 and run == 120 - start, (start, run)
want = r["documents"] * run / r["run_seconds"] if r["run_seconds"] > 0 else 0
assert abs(r["boid_iterations_per_second"] - want) <= 1e-6 * max(want, 1), (r["boid_iterations_per_second"], want)
PY
grep -q '"resumed_from_iteration"' "$t/full/report.json" && fail "resumed_from_iteration without --resume"

# the last iteration's checkpoint also when K does not divide --iterations, with and without a
# PNG series (a --resume of it then only re-clusters)
ck_iteration() { od -An -t d8 -j 32 -N 8 "$1" | tr -d ' '; }
"$dm" flock "${common[@]}" -o "$t/last" --checkpoint-every 15 > /dev/null
[ "$(ck_iteration "$t/last/flock.ckpt")" = 40 ] || fail "no checkpoint of the last iteration (15 does not divide 40)"
"$dm" flock "${common[@]}" -o "$t/lasts" --checkpoint-every 15 --snapshot-every 10 > /dev/null
[ "$(ck_iteration "$t/lasts/flock.ckpt")" = 40 ] || fail "no checkpoint of the last iteration with --snapshot-every"
"$dm" flock "${common[@]}" -o "$t/last" --checkpoint-every 15 --resume > /dev/null
grep -q '"iterations_run": 0,' "$t/last/report.json" || fail "the resume of the last checkpoint ran iterations"

# uneven slices, given or measured: the same outputs
"$mpiexec" -n 2 "$dm" flock "${common[@]}" -o "$t/w" --slice-weights 1,2.5 > /dev/null
cmp "$t/one/positions.csv" "$t/w/positions.csv" || fail "positions differ with uneven slices"
"$mpiexec" -n 2 "$dm" flock "${common[@]}" -o "$t/auto" --slice-weights auto > /dev/null
cmp "$t/one/positions.csv" "$t/auto/positions.csv" || fail "positions differ with measured slices"
grep -q '"slice_weights"' "$t/auto/report.json" || fail "no slice weights in the report"

# clusters merged by centroid: said in the report, no more clusters than without, and the same
# assignments on 1 and 3 ranks
"$dm" flock "${common[@]}" -o "$t/m1" --small centroid --merge 0.3 > /dev/null
"$mpiexec" -n 3 "$dm" flock "${common[@]}" -o "$t/m3" --small centroid --merge 0.3 > /dev/null
cmp "$t/m1/assignments.tsv" "$t/m3/assignments.tsv" || fail "merged assignments differ between 1 and 3 ranks"
grep -q '"merge": 0.3' "$t/m1/report.json" || fail "no merge in the report's model"
grep -q 'then clusters merged while two centroids have cosine >= 0.3' "$t/m1/report.json" || fail "extraction without the merge"
[ "$(wc -l < "$t/m1/clusters.tsv")" -le "$(wc -l < "$t/one/clusters.tsv")" ] || fail "merging made more clusters"

# refinement: in the report (model, steps, moves, extraction) and the same assignments on 1 and 3
# ranks
"$dm" flock "${common[@]}" -o "$t/r1" --small centroid --merge 0.3 --refine 20 > /dev/null
"$mpiexec" -n 3 "$dm" flock "${common[@]}" -o "$t/r3" --small centroid --merge 0.3 --refine 20 > /dev/null
cmp "$t/r1/assignments.tsv" "$t/r3/assignments.tsv" || fail "refined assignments differ between 1 and 3 ranks"
grep -q '"refine": 20' "$t/r1/report.json" || fail "no refine in the report's model"
grep -Eq '"refine_steps": [1-9]' "$t/r1/report.json" || fail "no refinement step in the report"
grep -q '"refine_moved"' "$t/r1/report.json" || fail "no refinement moves in the report"
grep -q 'then up to 20 refinement steps' "$t/r1/report.json" || fail "extraction without the refinement"

"$dm" flock "${common[@]}" -o "$t/snap" --snapshot-every 10 > /dev/null
[ "$(ls "$t/snap/snapshots" | wc -l)" -eq 4 ] || fail "expected 4 snapshots"

# a folder used again: an unlabelled run removes the labelled run's flock-labels.png and the
# earlier PNG series, and nothing else
"$dm" synth -n 300 -k 3 -o "$t/c.tsv" > /dev/null 2>&1
"$dm" vectorize --quiet --corpus "$t/c.tsv" --labels none -o "$t/nolab.dmv" > /dev/null
touch "$t/snap/snapshots/notes.txt" "$t/snap/snapshots/flock-final.png" "$t/snap/mine.txt"
"$dm" flock --backend cpu --vectors "$t/nolab.dmv" --iterations 20 --snapshot-every 7 --quiet -o "$t/snap" > /dev/null
[ -e "$t/snap/flock-labels.png" ] && fail "an earlier run's flock-labels.png left beside an unlabelled run's outputs"
[ "$(ls "$t/snap/snapshots" | tr '\n' ' ')" = "flock-000007.png flock-000014.png flock-000020.png flock-final.png notes.txt " ] \
  || fail "snapshots mix two runs' series: $(ls "$t/snap/snapshots" | tr '\n' ' ')"
[ -e "$t/snap/mine.txt" ] || fail "another file removed"

set +e
"$dm" flock --synth 10 -o "$t/x" --vmax 2 --quiet 2>/dev/null; [ $? -eq 2 ] || fail "--vmax above radius accepted"
"$dm" flock -o "$t/x" --quiet 2>/dev/null; [ $? -eq 2 ] || fail "missing input accepted"
"$dm" flock --synth 10 -o "$t/x" --weights 1,2 --quiet 2>/dev/null; [ $? -eq 2 ] || fail "bad --weights accepted"
"$dm" flock --synth 10 -o "$t/x" --merge 1.5 --quiet 2>/dev/null; [ $? -eq 2 ] || fail "--merge 1.5 accepted"
"$dm" flock --synth 10 -o "$t/x" --refine -1 --quiet 2>/dev/null; [ $? -eq 2 ] || fail "--refine -1 accepted"
"$dm" flock --vectors "$t/none.dmv" -o "$t/x" --quiet 2>/dev/null; [ $? -eq 1 ] || fail "missing file not a runtime error"
# whole numbers: a fraction is refused, naming the option (was: --iterations 2.5 ran 2)
for o in "--iterations 2.5" "--checkpoint-every 1.5" "--min-cluster 4.9" "--synth-topics 2.5"; do
  "$dm" flock --synth 10 -o "$t/x" $o --quiet 2> "$t/err"; [ $? -eq 2 ] || fail "$o accepted"
  grep -q -- "${o% *} takes a whole number" "$t/err" || fail "$o: $(cat "$t/err")"
done
"$dm" flock --synth 100 -o "$t/x" --iterations 1e1 --quiet --neighbours 1 > /dev/null || fail "--iterations 1e1 refused"
# weights that made every position NaN; a radius beyond the fixed-point sums (was UB)
"$dm" flock --synth 10 -o "$t/x" --weights 1e308,1e308,1e308,1e308 --quiet 2> "$t/err"; [ $? -eq 2 ] || fail "--weights 1e308 accepted"
grep -q -- "--weights expects S,D,A,C (four numbers in \[0, 1e+06\])" "$t/err" || fail "weights: $(cat "$t/err")"
"$dm" flock --synth 400 -o "$t/x" --radius 6e8 --vmax 1 --quiet 2>/dev/null; [ $? -eq 2 ] || fail "--radius 6e8 accepted"
"$dm" flock --synth 3000 -o "$t/x" --radius 1e6 --vmax 1 --quiet 2> "$t/err"; [ $? -eq 2 ] || fail "3000 x 1e6 accepted"
grep -q "too large for 3000 documents" "$t/err" || fail "radius: $(cat "$t/err")"
# a tiny --neighbours: refused at once (was a 5 GB grid for 400 documents)
"$dm" flock --synth 400 -o "$t/x" --neighbours 1e-6 --quiet 2> "$t/err"; [ $? -eq 2 ] || fail "--neighbours 1e-6 accepted"
grep -q "neighbours 1e-06 makes a plane of" "$t/err" || fail "neighbours: $(cat "$t/err")"
# a checkpoint file that is a directory: said before the run
mkdir -p "$t/ckdir"
"$dm" flock --synth 400 -o "$t/x" --checkpoint-every 5 --checkpoint "$t/ckdir" --quiet 2> "$t/err"; [ $? -eq 2 ] \
  || fail "a directory as the checkpoint accepted"
grep -q "ckdir: the checkpoint file is a directory" "$t/err" || fail "checkpoint directory: $(cat "$t/err")"
# a checkpoint file that is another file (here the input vectors): refused before the run and
# left as it is (was: overwritten by the first checkpoint); one in a missing folder: said before
# the run, naming the checkpoint (was: its temporary file, after K iterations)
cp "$t/nolab.dmv" "$t/keep.dmv"
"$dm" flock --backend cpu --vectors "$t/nolab.dmv" -o "$t/x" --iterations 10 --checkpoint-every 5 \
  --checkpoint "$t/nolab.dmv" --quiet 2> "$t/err"; [ $? -eq 2 ] || fail "the input vectors as the checkpoint accepted"
grep -q "nolab.dmv: exists and is not a docmine flock checkpoint; not overwriting it" "$t/err" || fail "ckpt over input: $(cat "$t/err")"
cmp -s "$t/nolab.dmv" "$t/keep.dmv" || fail "the input vectors were overwritten by a checkpoint"
"$dm" flock --synth 400 -o "$t/x" --checkpoint-every 5 --checkpoint "$t/nodir/x.ck" --quiet 2> "$t/err"; [ $? -eq 1 ] \
  || fail "a checkpoint in a missing folder accepted"
grep -q "nodir/x.ck: cannot write the checkpoint: its folder" "$t/err" || fail "checkpoint folder: $(cat "$t/err")"
# a resume with another option, on 3 ranks: refused on every rank (no hang), naming the file and
# the option with both values
timeout 120 "$mpiexec" -n 3 "$dm" flock "${common[@]/40/41}" -o "$t/last" --resume 2> "$t/err"; [ $? -eq 2 ] \
  || fail "a resume with other --iterations accepted"
grep -q "last/flock.ckpt: the checkpoint was written with --iterations 40, this run has --iterations 41" "$t/err" \
  || fail "resume, other iterations: $(cat "$t/err")"
# a resume without a checkpoint, on 2 ranks: refused naming it, before DIR is made (an empty
# DIR was left behind)
timeout 120 "$mpiexec" -n 2 "$dm" flock "${common[@]}" -o "$t/never/made" --resume 2> "$t/err"; [ $? -eq 1 ] \
  || fail "a resume without a checkpoint accepted"
grep -q "resume: checkpoint $t/never/made/flock.ckpt: No such file" "$t/err" || fail "resume, no checkpoint: $(cat "$t/err")"
[ ! -e "$t/never" ] || fail "a refused resume left its output folder behind"
# an output folder that takes no files (/proc, even for root): said before the run (was: after
# it, naming the first output's temporary file)
if [ -d /proc ] && ! touch /proc/.dm_probe 2>/dev/null; then
  "$dm" flock --synth 400 -o /proc --quiet 2> "$t/err"; [ $? -eq 1 ] || fail "an unwritable output folder accepted"
  grep -q "^docmine flock: /proc: cannot write the outputs in this folder" "$t/err" || fail "output folder: $(cat "$t/err")"
fi
set -e
echo "1 passed, 0 failed"
