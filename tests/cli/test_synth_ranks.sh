#!/usr/bin/env bash
# `docmine synth` on 1, 2 and 3 ranks writes the same documents (concatenated parts).
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
"$dm" synth -n 10 -k 5 --seed 10 -o "$t/other.tsv" --quiet
! cmp -s <(head -10 "$t/one.tsv") "$t/other.tsv" || { echo "FAIL: seed ignored"; exit 1; }
echo "1 passed, 0 failed"
