#!/usr/bin/env bash
# `docmine synth` on 1, 2, 3 and 4 ranks (and more ranks than documents) writes the same
# documents (concatenated parts); a run into a folder where an earlier run with more ranks wrote
# leaves only its own parts there; one file's missing folder is made.
set -euo pipefail
dm=$1; mpiexec=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
"$dm" synth -n 1234 -k 5 --seed 9 -o "$t/one.tsv" --quiet
"$mpiexec" -n 2 "$dm" synth -n 1234 -k 5 --seed 9 -o "$t/two" --quiet
"$mpiexec" -n 3 "$dm" synth -n 1234 -k 5 --seed 9 -o "$t/three" --quiet
cat "$t"/two/part-*.tsv > "$t/two.tsv"
cat "$t"/three/part-*.tsv > "$t/three.tsv"
n=$(wc -l < "$t/one.tsv")
[ "$n" -eq 1234 ] || { echo "FAIL: $n lines, expected 1234"; exit 1; }
cmp "$t/one.tsv" "$t/two.tsv" && cmp "$t/one.tsv" "$t/three.tsv" || { echo "FAIL: corpora differ"; exit 1; }
# 1 and 2 ranks into the folder of the 3-rank run: the third (and second) part were removed
"$mpiexec" -n 2 "$dm" synth -n 1234 -k 5 --seed 9 -o "$t/three" --quiet
[ ! -e "$t/three/part-00002.tsv" ] || { echo "FAIL: part-00002.tsv of the 3-rank run left beside 2 parts"; exit 1; }
cat "$t"/three/part-*.tsv | cmp - "$t/one.tsv" || { echo "FAIL: 2 ranks into the 3-rank folder: corpus differs"; exit 1; }
"$dm" synth -n 1234 -k 5 --seed 9 -o "$t/three" --quiet
[ "$(ls "$t/three")" = part-00000.tsv ] || { echo "FAIL: 1 rank into the 3-rank folder left: $(ls "$t/three")"; exit 1; }
cmp "$t/three/part-00000.tsv" "$t/one.tsv" || { echo "FAIL: 1 rank into a folder: corpus differs"; exit 1; }
# more ranks than documents (empty parts) and 4 ranks on a count they do not divide
"$dm" synth -n 2 -k 5 --seed 9 -o "$t/few.tsv" --quiet
"$mpiexec" -n 3 "$dm" synth -n 2 -k 5 --seed 9 -o "$t/few" --quiet
[ "$(ls "$t/few" | wc -l)" -eq 3 ] || { echo "FAIL: 3 ranks, 2 documents: parts $(ls "$t/few")"; exit 1; }
cat "$t"/few/part-*.tsv | cmp - "$t/few.tsv" || { echo "FAIL: 3 ranks, 2 documents: corpus differs"; exit 1; }
"$mpiexec" -n 4 "$dm" synth -n 1234 -k 5 --seed 9 -o "$t/four" --quiet
cat "$t"/four/part-*.tsv | cmp - "$t/one.tsv" || { echo "FAIL: 4 ranks: corpus differs"; exit 1; }
# one file in a folder that does not exist yet: the folder is made, as for the folder of parts
# (it failed, naming the temporary file)
"$dm" synth -n 1234 -k 5 --seed 9 -o "$t/new/sub/one.tsv" --quiet || { echo "FAIL: -o into a missing folder"; exit 1; }
cmp "$t/new/sub/one.tsv" "$t/one.tsv" || { echo "FAIL: -o into a missing folder: corpus differs"; exit 1; }
"$dm" synth -n 10 -k 5 --seed 10 -o "$t/other.tsv" --quiet
! cmp -s <(head -10 "$t/one.tsv") "$t/other.tsv" || { echo "FAIL: seed ignored"; exit 1; }
echo "1 passed, 0 failed"
