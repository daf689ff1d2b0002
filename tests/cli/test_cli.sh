#!/usr/bin/env bash
# The command line's contract: exit codes (0 ok, 1 runtime, 2 usage) and one-line errors.
# usage: test_cli.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
pass=0
fail=0
check() { # check <name> <expected rc> <expected stderr regex or ""> -- command...
    local name=$1 want=$2 re=$3
    shift 4
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    local lines
    lines=$(printf '%s' "$err" | grep -c . || true)
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL $name: exit $rc, expected $want; stderr: $err"; fail=$((fail + 1)); return
    fi
    if [ -n "$re" ] && { ! printf '%s' "$err" | grep -Eq -- "$re" || [ "$lines" -ne 1 ]; }; then
        echo "FAIL $name: stderr is not one line matching /$re/: $err"; fail=$((fail + 1)); return
    fi
    echo "ok   $name"; pass=$((pass + 1))
}
check "help" 0 "" -- "$dm" --help
check "version" 0 "" -- "$dm" --version
check "no command" 2 "" -- "$dm"
check "unknown command" 2 "unknown command 'frobnicate'" -- "$dm" frobnicate
check "unknown option" 2 "unknown or incomplete option '--bogus'" -- "$dm" info --bogus
check "bad global value" 2 "invalid value 'x' for --threads" -- "$dm" info --threads x
# an empty -o: a usage error before any work, on every command that writes (was: exit 1 and
# ": cannot create directory", or a temporary file's name)
for c in "flock --synth 100" "icf-build --corpus x" "pipeline --synthetic 100" "streamclust 1 2 3 4 5 6" \
         "synth" "vectorize --corpus x" "preprocess --corpus x"; do
    # shellcheck disable=SC2086 # the command and its arguments
    check "${c%% *} -o ''" 2 "^docmine ${c%% *}: -o: an empty path" -- "$dm" $c -o ""
done
check "bad backend" 2 "invalid value 'gpu' for --backend" -- "$dm" info --backend gpu
check "missing value" 2 "option --report needs a value" -- "$dm" info --report
check "empty --tuning-db" 2 "invalid value '' for --tuning-db" -- "$dm" info --tuning-db ''
check "empty --report" 2 "invalid value '' for --report" -- "$dm" info --report ''
# a command's bad value names its option, written with the value as the next word or after '='
check "bad pipeline value" 2 "invalid value '0' for --synthetic" -- "$dm" pipeline --synthetic 0 -o "$(mktemp -u)"
check "bad pipeline value, =" 2 "invalid value '0' for --synthetic" -- "$dm" pipeline --synthetic=0 -o "$(mktemp -u)"
check "unknown pipeline option named" 2 "unknown or incomplete option '--bogus-opt'" -- "$dm" pipeline --bogus-opt -o "$(mktemp -u)"
check "unknown flock option named" 2 "unknown or incomplete option '--bogus-opt'" -- "$dm" flock --bogus-opt -o "$(mktemp -u)"
check "pipeline option without its value" 2 "unknown or incomplete option '--synthetic'" -- "$dm" pipeline -o "$(mktemp -u)" --synthetic
check "fractional pipeline count" 2 "invalid value '10.5' for --synthetic \\(a whole number, 1 to 1000000000000\\)" -- "$dm" pipeline --synthetic 10.5 -o "$(mktemp -u)"
check "pipeline: a generator option with --corpus" 2 "^docmine pipeline: --synth-overlap is for a synthetic corpus \\(--synthetic\\), not --corpus" -- \
    "$dm" pipeline --corpus /nonexistent --synth-overlap 0.2 -o "$(mktemp -u)"
check "info --bytes negative" 2 "invalid --bytes '-1'" -- "$dm" info --bytes -1
check "pipeline count out of range" 2 "invalid value '0' for --synthetic \\(a whole number, 1 to 1000000000000\\)" -- "$dm" pipeline --synthetic 0 -o "$(mktemp -u)"
check "fractional docs per rank" 2 "invalid value '99.5' for --docs-per-rank" -- "$dm" pipeline --docs-per-rank 99.5 -o "$(mktemp -u)"
check "fractional streamclust dim" 2 "invalid value '8.5' for --dim" -- "$dm" pipeline --synthetic 50 --method streamclust --dim 8.5 -o "$(mktemp -u)"
check "bad shared flock value" 2 "invalid value '-1' for --radius" -- "$dm" pipeline --synthetic 50 --radius -1 -o "$(mktemp -u)"
check "bad flock value" 2 "invalid value 'x' for --iterations" -- "$dm" flock --vectors v.dmv --iterations x -o "$(mktemp -u)"
check "bad synth value" 2 "invalid value '0' for --min-words" -- "$dm" synth -n 5 --min-words 0 -o "$(mktemp -u)"
check "info" 0 "" -- "$dm" info --backend cpu
check "info help with cuda" 0 "" -- "$dm" info --help --backend cuda
check "report to missing dir" 1 "/nonexistent-dir/r.json" -- "$dm" info --backend cpu --report /nonexistent-dir/r.json
if ! "$dm" info --backend auto 2>/dev/null | grep -q '^ranks .*backend cuda'; then
    check "cuda without GPU" 1 "--backend cuda: no CUDA GPU|built without CUDA" -- "$dm" info --backend cuda
    check "bandwidth without GPU" 1 "needs a GPU" -- "$dm" info --bandwidth
    check "cuda without GPU, 2 ranks" 1 "--backend cuda" -- "$mpiexec" -n 2 "$dm" info --backend cuda
fi
check "2 ranks" 0 "" -- "$mpiexec" -n 2 "$dm" info --backend cpu
out=$("$mpiexec" -n 2 "$dm" info --backend cpu 2>/dev/null)
if printf '%s\n' "$out" | grep -q '^ranks    2 on 1 node'; then echo "ok   2 ranks listed"; pass=$((pass + 1)); else echo "FAIL 2 ranks listed: $out"; fail=$((fail + 1)); fi
# threads per rank: --threads, else OMP_NUM_THREADS, else the rank's share of the CPUs it may use
# (two unbound ranks on this machine: each at most half of its processors, at least 1)
ncpu=$(env -u OMP_NUM_THREADS nproc)
out=$("$dm" info --backend cpu --threads 1 2>/dev/null)
if printf '%s\n' "$out" | grep -Eq '^0 +[^ ]+ +0 +1 '; then echo "ok   --threads 1 listed"; pass=$((pass + 1)); else echo "FAIL --threads 1: $out"; fail=$((fail + 1)); fi
# --threads above the CPUs: the CPUs, with a warning; a pipeline with --threads 4096 ends as soon
# as with the CPUs (it took 63 s instead of 0.4 s on 2 cores: the threads waited for each other at
# every OpenMP barrier)
thr=$(mktemp -d)
out=$("$dm" info --backend cpu --threads 4096 2>"$thr/err")
if printf '%s\n' "$out" | grep -Eq "^0 +[^ ]+ +0 +$ncpu " && grep -q -- "--threads 4096: rank 0 may run on $ncpu CPU" "$thr/err"; then
    echo "ok   --threads 4096: the $ncpu CPUs, and said"; pass=$((pass + 1))
else echo "FAIL --threads 4096: $out $(cat "$thr/err")"; fail=$((fail + 1)); fi
if timeout 60 "$dm" --backend cpu --threads 4096 pipeline --quiet --synthetic 500 -o "$thr/out" >/dev/null 2>&1; then
    echo "ok   pipeline --threads 4096 ends"; pass=$((pass + 1))
else echo "FAIL pipeline --threads 4096 did not end in 60 s"; fail=$((fail + 1)); fi
rm -rf "$thr"
want=$(( ncpu / 2 > 0 ? ncpu / 2 : 1 ))
out=$(env -u OMP_NUM_THREADS "$mpiexec" -n 2 "$dm" info --backend cpu 2>/dev/null)
if [ "$(printf '%s\n' "$out" | grep -Ec "^[01] +[^ ]+ +[01] +$want ")" -eq 2 ]; then echo "ok   2 unbound ranks: $want threads each"; pass=$((pass + 1))
else echo "FAIL 2 unbound ranks, expected $want threads each: $out"; fail=$((fail + 1)); fi
# huge pages: docmine asks glibc for them (re-executing itself with GLIBC_TUNABLES) unless
# DOCMINE_HUGEPAGES=0 or the user's GLIBC_TUNABLES names the tunable; the report says which
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hp() { # hp <name> <expected glibc_malloc_hugetlb> -- env assignments and command...
    local name=$1 want=$2
    shift 3
    rm -f "$tmp/r.json"
    if ! env -u GLIBC_TUNABLES -u DOCMINE_HUGEPAGES "$@" --report "$tmp/r.json" >/dev/null 2>&1; then
        echo "FAIL $name: the command failed"; fail=$((fail + 1)); return
    fi
    if grep -q "\"glibc_malloc_hugetlb\": \"$want\"" "$tmp/r.json"; then echo "ok   $name"; pass=$((pass + 1))
    else echo "FAIL $name: report has $(grep glibc_malloc_hugetlb "$tmp/r.json"), expected $want"; fail=$((fail + 1)); fi
}
hp "huge pages by default" 1 -- "$dm" info --backend cpu
hp "huge pages off" unset -- DOCMINE_HUGEPAGES=0 "$dm" info --backend cpu
hp "huge pages: the user's setting kept" 0 -- GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$dm" info --backend cpu
hp "huge pages next to other tunables" 1 -- GLIBC_TUNABLES=glibc.malloc.arena_max=4 "$dm" info --backend cpu
hp "huge pages on 2 ranks" 1 -- "$mpiexec" -n 2 "$dm" info --backend cpu
# an output named by a FIFO (or a device) is refused, not replaced by the rename of the
# temporary (as root, --report /dev/null replaced /dev/null itself)
mkfifo "$tmp/fifo"
check "report into a FIFO refused" 1 "fifo: rename from temporary failed: not a regular file" -- "$dm" info --backend cpu --report "$tmp/fifo"
check "tuning database a FIFO: not replaced" 0 "" -- "$dm" info --backend cpu --tuning-db "$tmp/fifo"
if [ -p "$tmp/fifo" ]; then echo "ok   the FIFO is still a FIFO"; pass=$((pass + 1)); else echo "FAIL the FIFO was replaced"; fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
