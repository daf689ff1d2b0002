#!/usr/bin/env bash
# `docmine streamclust` end to end (CPU backend): outputs in Rodinia's centres format, one
# assignment per point, report.json with results and per-phase timers, the same centres on 1 and
# 2 ranks' runs are valid, binary file input equals the generator's points, and the input errors
# exit with one line naming the file. usage: test_streamclust_cli.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check_err() { # check_err <name> <rc> <regex> -- command...
    local name=$1 want=$2 re=$3
    shift 4
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, expected $want: $err"; return; fi
    if ! printf '%s' "$err" | grep -Eq -- "$re"; then bad "$name: stderr /$re/: $err"; return; fi
    if [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then bad "$name: not one line: $err"; return; fi
    ok "$name"
}
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
    check_err "short file" 1 "pts.bin: file shorter than declared" -- "$dm" --backend cpu streamclust 5 10 8 4000 1000 200 --input "$tmp/pts.bin" -o "$tmp/o"
    check_err "dim mismatch" 1 "pts.bin: DIM mismatch" -- "$dm" --backend cpu streamclust 5 10 7 0 1000 200 --input "$tmp/pts.bin" -o "$tmp/o"
fi
check_err "kmin > kmax" 2 "KMIN \(11\) > KMAX \(10\)" -- "$dm" --backend cpu streamclust 11 10 8 100 100 200 -o "$tmp/o"
check_err "n = 0 without input" 2 "N = 0 needs an input file" -- "$dm" --backend cpu streamclust 5 10 8 0 100 200 -o "$tmp/o"
check_err "clustersize < kmax" 2 "CLUSTERSIZE \(4\) too small" -- "$dm" --backend cpu streamclust 5 10 8 100 100 4 -o "$tmp/o"
check_err "clustersize overflow" 2 "CLUSTERSIZE 12 too small" -- "$dm" --backend cpu streamclust 5 10 4 3000 200 12 -o "$tmp/o"
check_err "missing file" 1 "/nonexistent/p.bin" -- "$dm" --backend cpu streamclust 5 10 8 0 100 200 --input /nonexistent/p.bin -o "$tmp/o"
check_err "five numbers" 2 "expected KMIN KMAX DIM N CHUNKSIZE CLUSTERSIZE" -- "$dm" --backend cpu streamclust 5 10 8 100 100 -o "$tmp/o"
check_err "no outdir" 2 "missing -o OUTDIR" -- "$dm" --backend cpu streamclust 5 10 8 100 100 200
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
