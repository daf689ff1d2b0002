# The checks of the command-line tests, sourced by them (. "$(dirname "$0")/../testutil/cli_lib.sh"):
# counters, one line per check ("ok   NAME" / "FAIL NAME: why"), and finish, whose status is the
# test's.
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# _expect <one line?> <name> <rc> <stderr regex> -- command...: the command's exit code, and its
# stderr matching the regex (an empty regex: stderr not looked at), in one line when asked.
_expect() {
    local one=$1 name=$2 want=$3 re=$4
    shift 5
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, expected $want: $err"; return; fi
    if [ -n "$re" ] && ! printf '%s' "$err" | grep -Eq -- "$re"; then bad "$name: stderr does not match /$re/: $err"; return; fi
    if [ "$one" = 1 ] && [ -n "$re" ] && [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then
        bad "$name: not one line: $err"
        return
    fi
    ok "$name"
}
# expect <name> <rc> <stderr regex> -- command...: an error is one line (the project's rule)
expect() { _expect 1 "$@"; }
# exits <name> <rc> <stderr regex> -- command...: stderr of any number of lines
exits() { _expect 0 "$@"; }

# check <name> <condition> [detail]: the condition (a shell expression) holds
check() { if eval "$2"; then ok "$1"; else bad "$1${3:+: $3}"; fi; }
# json <file> <python expression on r = the report's results>: true when it holds
json() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]; sys.exit(not eval(sys.argv[2]))' "$1" "$2"; }

# mkcorpus <file> <documents> <id prefix>: JSON Lines of three topics, seeded by the prefix
mkcorpus() {
    python3 - "$@" <<'PY'
import json, random, sys
f, n, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
random.seed(len(p))
T = [["oil", "crude", "barrel", "opec"], ["wheat", "grain", "corn", "harvest"], ["bank", "rate", "loan", "credit"]]
with open(f, "w") as o:
    for i in range(n):
        o.write(json.dumps({"id": "%s%d" % (p, i), "label": "t%d" % (i % 3),
                            "text": " ".join(random.choice(T[i % 3]) for _ in range(20))}) + "\n")
PY
}

# The summary line; the test's status.
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
