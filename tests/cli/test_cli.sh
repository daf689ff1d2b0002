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
check "bad backend" 2 "invalid value 'gpu' for --backend" -- "$dm" info --backend gpu
check "missing value" 2 "option --report needs a value" -- "$dm" info --report
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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
