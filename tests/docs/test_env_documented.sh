#!/usr/bin/env bash
# Every DOCMINE_* environment variable that the code, benchmarks or scripts read is listed in
# docs/ENVIRONMENT.md, and every variable listed there is still read somewhere (a stale row
# fails too). Usage: test_env_documented.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: test_env_documented.sh SOURCE_DIR}
doc=$src/docs/ENVIRONMENT.md
[ -f "$doc" ] || { echo "FAIL: $doc missing"; exit 1; }
cd "$src"
# read by the code (a quoted name: getenv or a helper given the name), by the tests (getenv: their
# other quoted names are fixtures), by shell scripts as ${DOCMINE_...} or $DOCMINE_..., or by CMake
# when it configures ($ENV{DOCMINE_...})
c=(--include='*.c' --include='*.cu' --include='*.h' --include='*.cuh')
read_vars=$( { grep -rhoE '"DOCMINE_[A-Z0-9_]+"' "${c[@]}" apps common preprocess tfidf flock streamclust sorting datasets bench |
                   tr -d '"';
               grep -rhoE 'getenv\("DOCMINE_[A-Z0-9_]+"' "${c[@]}" tests | sed 's/getenv("//; s/"//';
               grep -rhoE '\$\{?DOCMINE_[A-Z0-9_]+' --include='*.sh' --include='*.sbatch' scripts jobs bench datasets .ci tests |
                   tr -d '${';
               grep -rhoE '\$ENV\{DOCMINE_[A-Z0-9_]+' --include='CMakeLists.txt' --include='*.cmake' \
                   --exclude-dir='build*' --exclude-dir=out . | sed 's/^\$ENV{//'; } | sort -u)
doc_vars=$(grep -oE 'DOCMINE_[A-Z0-9_]+' "$doc" | sort -u)
bad=0
for v in $read_vars; do
    grep -q "\`$v\`" "$doc" || { echo "FAIL: $v is read but not in docs/ENVIRONMENT.md"; bad=1; }
done
for v in $doc_vars; do
    grep -qx "$v" <<<"$read_vars" || { echo "FAIL: $v is in docs/ENVIRONMENT.md but nothing reads it"; bad=1; }
done
[ $bad = 0 ] && echo "ok: $(wc -w <<<"$read_vars") variables, all documented"
exit $bad
