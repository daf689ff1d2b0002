#!/usr/bin/env bash
# `docmine streamclust` end to end (CPU backend): outputs in Rodinia's centres format, one
# assignment per point, report.json with results and per-phase timers, the same centres on 1 and
# 2 ranks' runs are valid, binary file input equals the generator's points, and the input errors
# exit with one line naming the file; document vectors (--vectors) of separated topics are clustered
# by topic (NMI >= 0.9) on 1 and 2 ranks, and bad vector files or a DIM outside 1..65536 fail
# with one line; KMIN = KMAX = 1 gives one centre, fewer documents than KMIN a give-up; a NaN in
# an input file, sizes beyond a size_t and a path naming another file (or none) on one rank fail
# on every rank with one line.
# usage: test_streamclust_cli.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"
# centres file: blocks of id, weight, coordinates, blank line
centres_ok() { # centres_ok <file> <dim> <kmin> <kmax> <n>
    awk -v dim="$2" -v kmin="$3" -v kmax="$4" -v n="$5" '
        BEGIN { RS = ""; FS = "\n" }
        { k++; if ($1 !~ /^[0-9]+$/ || $1 >= n) bad = 1; w += $2; if (split($3, c, " ") != dim) bad = 1 }
        END { if (bad || k < kmin || k > kmax || (w - n > 1e-3 || n - w > 1e-3)) exit 1 }' "$1"
}

out=$tmp/gen
if OMP_NUM_THREADS=1 "$dm" --backend cpu streamclust 5 10 8 3001 1000 200 -o "$out" >/dev/null 2>&1; then
    ok "generated run"
else
    bad "generated run"
fi
if centres_ok "$out/centers.txt" 8 5 10 3001; then ok "centers.txt format"; else bad "centers.txt format"; fi
if [ "$(wc -l < "$out/assignments.tsv")" -eq 3002 ]; then ok "assignments.tsv rows"; else bad "assignments.tsv rows"; fi
if grep -q '"total_cost"' "$out/report.json" && grep -q '"streamclust.gain"' "$out/report.json" &&
   grep -q '"streamclust.speedy"' "$out/report.json"; then
    ok "report.json results and timers"
else
    bad "report.json results and timers"
fi
out2=$tmp/gen2
if OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$dm" --backend cpu streamclust 5 10 8 3001 1000 200 -o "$out2" >/dev/null 2>&1 &&
   centres_ok "$out2/centers.txt" 8 5 10 3001 && [ "$(wc -l < "$out2/assignments.tsv")" -eq 3002 ]; then
    ok "two ranks"
else
    bad "two ranks"
fi
# a file holding the generator's points gives the same result as the generator
if command -v python3 >/dev/null; then
    python3 - "$tmp/pts.bin" <<'PY'
import struct, sys
a, c, m = 0x5DEECE66D, 0xB, (1 << 48) - 1
x = (1 << 16) | 0x330E
out = open(sys.argv[1], "wb")
for _ in range(3001 * 8):
    x = (a * x + c) & m
    out.write(struct.pack("<f", float(x >> 17) / float(2147483647)))
PY
    out3=$tmp/file
    if OMP_NUM_THREADS=1 "$dm" --backend cpu streamclust 5 10 8 0 1000 200 --input "$tmp/pts.bin" -o "$out3" >/dev/null 2>&1 &&
       cmp -s "$out/centers.txt" "$out3/centers.txt"; then
        ok "file input equals generator"
    else
        bad "file input equals generator"
    fi
    expect "short file" 1 "pts.bin: file shorter than declared" -- "$dm" --backend cpu streamclust 5 10 8 4000 1000 200 --input "$tmp/pts.bin" -o "$tmp/o"
    expect "dim mismatch" 1 "pts.bin: DIM mismatch" -- "$dm" --backend cpu streamclust 5 10 7 0 1000 200 --input "$tmp/pts.bin" -o "$tmp/o"
    # a NaN in the file: the error names the file and the point (was "coordinate 3 of point 1500
    # is not finite", no file), on 1 and 2 ranks
    cp "$tmp/pts.bin" "$tmp/nan.bin"
    printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan.bin" bs=4 seek=$((1500 * 8 + 3)) conv=notrunc 2>/dev/null
    expect "NaN in the file" 1 "nan.bin: coordinate 3 of point 1500 is not finite" -- "$dm" --backend cpu streamclust 5 10 8 0 1000 200 --input "$tmp/nan.bin" -o "$tmp/o"
    expect "NaN in the file, 2 ranks" 1 "nan.bin: coordinate 3 of point 1500 is not finite" -- "$mpiexec" -n 2 "$dm" --backend cpu streamclust 5 10 8 0 1000 200 --input "$tmp/nan.bin" -o "$tmp/o"
fi
expect "kmin > kmax" 2 "KMIN \(11\) > KMAX \(10\)" -- "$dm" --backend cpu streamclust 11 10 8 100 100 200 -o "$tmp/o"
expect "n = 0 without input" 2 "N = 0 needs an input file" -- "$dm" --backend cpu streamclust 5 10 8 0 100 200 -o "$tmp/o"
expect "clustersize < kmax" 2 "CLUSTERSIZE \(4\) too small" -- "$dm" --backend cpu streamclust 5 10 8 100 100 4 -o "$tmp/o"
expect "clustersize overflow" 2 "CLUSTERSIZE 12 too small" -- "$dm" --backend cpu streamclust 5 10 4 3000 200 12 -o "$tmp/o"
expect "missing file" 1 "/nonexistent/p.bin" -- "$dm" --backend cpu streamclust 5 10 8 0 100 200 --input /nonexistent/p.bin -o "$tmp/o"
expect "five numbers" 2 "expected KMIN KMAX DIM N CHUNKSIZE CLUSTERSIZE" -- "$dm" --backend cpu streamclust 5 10 8 100 100 -o "$tmp/o"
# sizes beyond the host's memory: the error names the parameter (was "points: 1000000000 x 256 floats")
expect "CLUSTERSIZE beyond memory" 1 "no memory for CLUSTERSIZE \(1000000000000\) centres of DIM \(256\)" -- "$dm" --backend cpu streamclust 10 20 256 1000 1000 1000000000000 -o "$tmp/o"
# sizes whose bytes overflow a size_t: no memory, as above (2^62 x DIM 4 x 4 bytes wrapped to 0:
# a crash in the first chunk's copy of its centres)
expect "CLUSTERSIZE beyond size_t" 1 "no memory for CLUSTERSIZE \(4611686018427387904\) centres of DIM \(4\)" -- "$dm" --backend cpu streamclust 1 2 4 100 100 4611686018427387904 -o "$tmp/o"
expect "no outdir" 2 "missing -o OUTDIR" -- "$dm" --backend cpu streamclust 5 10 8 100 100 200
# outputs under temporary names of their own: an old run's temporary name in the way is no
# obstacle, and a file that cannot be put in place leaves no temporary behind
mkdir -p "$tmp/ob/centers.txt.tmp" "$tmp/oc/assignments.tsv"
exits "a nested output folder made" 0 "" -- "$dm" --backend cpu streamclust 5 10 8 400 100 200 -o "$tmp/deep/a/b"
exits "a stale temporary name" 0 "" -- "$dm" --backend cpu streamclust 5 10 8 400 100 200 -o "$tmp/ob"
[ -s "$tmp/ob/centers.txt" ] && ok "centres written beside a stale temporary name" || bad "no centers.txt beside a stale temporary name"
exits "assignments.tsv cannot be replaced" 1 "assignments.tsv" -- "$dm" --backend cpu streamclust 5 10 8 400 100 200 -o "$tmp/oc"
left=$(find "$tmp/oc" -name '*.tmp*' | wc -l)
[ "$left" -eq 0 ] && ok "no temporary left by a failed output" || bad "$left temporary files left by a failed output"
# a run whose outputs failed writes no report of results that are not there (it did)
[ ! -e "$tmp/oc/report.json" ] && ok "no report.json after a failed output" || bad "report.json written after a failed output"

# --vectors: documents of 4 well separated synthetic topics, hashed into 256 dimensions, clustered
# into 4 centres in chunks of 250 documents: the centres recover the topics (NMI >= 0.9) on 1 and
# 2 ranks; every document gets one row with its id and label, in corpus order.
nmi_of() { sed -n 's/^ *"nmi": *\([0-9.eE+-]*\).*/\1/p' "$1" | head -1; }
if "$dm" synth -n 600 -k 4 --topic-vocab 300 --overlap 0.1 --seed 3 -o "$tmp/docs.tsv" >/dev/null 2>&1 &&
   "$dm" --backend cpu vectorize --corpus "$tmp/docs.tsv" -o "$tmp/docs.dmv" >/dev/null 2>&1; then
    ok "synthetic corpus vectorised"
else
    bad "synthetic corpus vectorised"
fi
for np in 1 2; do
    vo=$tmp/vec$np
    if OMP_NUM_THREADS=1 "$mpiexec" -n $np "$dm" --backend cpu streamclust 4 4 256 0 250 200 --vectors "$tmp/docs.dmv" -o "$vo" >/dev/null 2>&1; then
        ok "vectors run, $np rank(s)"
    else
        bad "vectors run, $np rank(s)"
        continue
    fi
    nmi=$(nmi_of "$vo/report.json")
    if [ -n "$nmi" ] && awk -v x="$nmi" 'BEGIN { exit !(x >= 0.9) }'; then ok "NMI $nmi >= 0.9, $np rank(s)"; else bad "NMI '$nmi' >= 0.9, $np rank(s)"; fi
    if grep -q '"ari"' "$vo/report.json" && grep -q '"purity"' "$vo/report.json" &&
       grep -q '"labelled_documents": 600' "$vo/report.json"; then
        ok "report.json quality, $np rank(s)"
    else
        bad "report.json quality, $np rank(s)"
    fi
    # header + 600 rows; ids and labels of the corpus in its order; centres in 0..3
    if [ "$(head -1 "$vo/assignments.tsv")" = "$(printf 'doc\tlabel\tcentre\tcentre_id\tsq_dist')" ] &&
       [ "$(wc -l < "$vo/assignments.tsv")" -eq 601 ] &&
       cmp -s <(tail -n +2 "$vo/assignments.tsv" | cut -f1,2) <(cut -f1,2 "$tmp/docs.tsv") &&
       awk -F'\t' 'NR > 1 && !($3 >= 0 && $3 < 4) { exit 1 }' "$vo/assignments.tsv"; then
        ok "vectors assignments.tsv, $np rank(s)"
    else
        bad "vectors assignments.tsv, $np rank(s)"
    fi
done
if centres_ok "$tmp/vec1/centers.txt" 256 4 4 600; then ok "vectors centers.txt"; else bad "vectors centers.txt"; fi
# bad vector inputs: one line naming the file or the parameter
expect "vectors: missing file" 1 "/nonexistent/v.dmv" -- "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors /nonexistent/v.dmv -o "$tmp/o"
cp "$tmp/docs.dmv" "$tmp/corrupt.dmv"
size=$(wc -c < "$tmp/corrupt.dmv")
printf 'XXXX' | dd of="$tmp/corrupt.dmv" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
if ! cmp -s "$tmp/docs.dmv" "$tmp/corrupt.dmv"; then
    expect "vectors: corrupt file" 1 "corrupt.dmv: .*checksum mismatch" -- "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors "$tmp/corrupt.dmv" -o "$tmp/o"
    expect "vectors: corrupt file, 2 ranks" 1 "corrupt.dmv: .*checksum mismatch" -- "$mpiexec" -n 2 "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors "$tmp/corrupt.dmv" -o "$tmp/o"
fi
head -c $((size - 100)) "$tmp/docs.dmv" > "$tmp/short.dmv"
expect "vectors: truncated file" 1 "short.dmv: .*truncated" -- "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors "$tmp/short.dmv" -o "$tmp/o"
printf 'not vectors at all, just some text that is long enough for a header of 64 bytes.....\n' > "$tmp/text.dmv"
expect "vectors: not a vector file" 1 "text.dmv: .*bad magic" -- "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors "$tmp/text.dmv" -o "$tmp/o"
expect "vectors: DIM 0" 2 "DIM must be within 1..65536 \(got 0\)" -- "$dm" --backend cpu streamclust 4 4 0 0 250 200 --vectors "$tmp/docs.dmv" -o "$tmp/o"
expect "vectors: DIM < 0" 2 "DIM must be within 1..65536 \(got -3\)" -- "$dm" --backend cpu streamclust --vectors "$tmp/docs.dmv" -o "$tmp/o" -- 4 4 -3 0 250 200
# 2^32 + 3 was taken as DIM 3 (an int cast)
expect "vectors: DIM beyond an int" 2 "DIM must be within 1..65536 \(got 4294967299\)" -- "$dm" --backend cpu streamclust 4 4 4294967299 0 250 200 --vectors "$tmp/docs.dmv" -o "$tmp/o"
# KMIN = KMAX = 1: one centre, not a give-up (ITER k ln k = 0 at k = 1 kept all of speedy's centres)
if OMP_NUM_THREADS=1 "$mpiexec" -n 2 "$dm" --backend cpu streamclust 1 1 64 0 250 200 --vectors "$tmp/docs.dmv" -o "$tmp/k1" > "$tmp/k1.log" 2>&1 &&
   grep -q '"k": 1,' "$tmp/k1/report.json" && grep -q '"gave_up": false' "$tmp/k1/report.json" &&
   ! grep -q "gave up" "$tmp/k1.log"; then
    ok "KMIN = KMAX = 1: one centre"
else
    bad "KMIN = KMAX = 1: one centre"
fi
# fewer documents than KMIN: every one a centre, reported as a give-up
if OMP_NUM_THREADS=1 "$dm" --backend cpu streamclust 700 800 64 0 1000 1000 --vectors "$tmp/docs.dmv" -o "$tmp/kbig" > "$tmp/kbig.log" 2>&1 &&
   grep -q '"k": 600,' "$tmp/kbig/report.json" && grep -q '"gave_up": true' "$tmp/kbig/report.json" &&
   grep -q "gave up" "$tmp/kbig.log"; then
    ok "fewer documents than KMIN: a give-up"
else
    bad "fewer documents than KMIN: a give-up"
fi
# a path that names another file on one rank (node-local disks: the same relative path, rank 0
# in folder A and rank 1 in B): every rank fails, the message names the file and the rank (a
# shorter file was read as far as it went and the run clustered 400 of 600 documents; a missing
# --input on rank 1 left rank 0 in the run's collectives). (Other arguments per rank, mpiexec's
# ':' form, are refused before any command: cli_mpi_failures.)
head -400 "$tmp/docs.tsv" > "$tmp/d400.tsv"
"$dm" synth -n 600 -k 4 --topic-vocab 200 --seed 5 -o "$tmp/other.tsv" >/dev/null 2>&1
# dmw <args...>: 2 ranks, the same arguments, rank 0 working in $tmp/A and rank 1 in $tmp/B
dmw() { timeout 60 "$mpiexec" -n 1 -wdir "$tmp/A" "$dm" "$@" : -n 1 -wdir "$tmp/B" "$dm" "$@"; }
mkdir -p "$tmp/A" "$tmp/B"
if "$dm" --backend cpu vectorize --corpus "$tmp/d400.tsv" -o "$tmp/d400.dmv" >/dev/null 2>&1 &&
   "$dm" --backend cpu vectorize --corpus "$tmp/other.tsv" -o "$tmp/other.dmv" >/dev/null 2>&1; then
    sc="--backend cpu streamclust 4 4 64 0 250 200 -o $tmp/mm --vectors v.dmv"
    cp "$tmp/docs.dmv" "$tmp/A/v.dmv" && cp "$tmp/d400.dmv" "$tmp/B/v.dmv"
    expect "vectors: a shorter file on rank 1" 1 "v.dmv: 400 documents on rank 1, 600 on rank 0: not the same file" -- dmw $sc
    cp "$tmp/other.dmv" "$tmp/B/v.dmv"
    expect "vectors: another vocabulary on rank 1" 1 "v.dmv: [0-9]+ terms .* on rank 1, [0-9]+ terms .* on rank 0: not the same file" -- dmw $sc
    rm "$tmp/B/v.dmv"
    expect "vectors: no file on rank 1" 1 "v.dmv: .*rank 1" -- dmw $sc
else
    bad "corpora of other files vectorised"
fi
if [ -f "$tmp/pts.bin" ]; then
    cp "$tmp/pts.bin" "$tmp/A/p.bin"
    expect "input: no file on rank 1" 1 "p.bin: .*rank 1" -- dmw --backend cpu streamclust 5 10 8 0 1000 200 -o "$tmp/mi" --input p.bin
fi
expect "vectors: N beyond the file" 1 "docs.dmv: file shorter than declared: 600 documents, N = 601" -- "$dm" --backend cpu streamclust 4 4 64 601 250 200 --vectors "$tmp/docs.dmv" -o "$tmp/o"
expect "vectors and input" 2 "--input and --vectors are exclusive" -- "$dm" --backend cpu streamclust 4 4 64 0 250 200 --vectors "$tmp/docs.dmv" --input "$tmp/x.bin" -o "$tmp/o"
finish
