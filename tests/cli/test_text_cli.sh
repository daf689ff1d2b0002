#!/usr/bin/env bash
# `docmine stem` and `docmine synth` at the edges of their inputs: a read error on stem's stdin
# (here: stdin is a directory) is an error naming stdin, not an empty word list; synth's counts
# (-n, -k, --min-words, --max-words, --topic-vocab, --shared-vocab) are whole numbers: a fraction
# is a usage error, not silently cut (-n 10.5 wrote 10 documents).
# usage: test_text_cli.sh <docmine>
set -u
dm=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-text-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"

expect "stem: stdin a directory" 1 "stdin: read error" -- sh -c '"$1" stem < "$2"' sh "$dm" "$tmp"
out=$(printf 'running\nponies\n' | "$dm" stem 2>&1)
if [ "$out" = "$(printf 'run\nponi')" ]; then ok "stem: words from a pipe"; else bad "stem: words from a pipe gave: $out"; fi

for o in "-n 10.5" "-k 2.5" "--min-words 50.5" "--max-words 99.9" "--topic-vocab 100.5" "--shared-vocab 1e-1"; do
    # shellcheck disable=SC2086
    expect "synth $o refused" 2 "invalid" -- "$dm" synth -n 10 -k 3 $o -o "$tmp/x.tsv" --quiet
    [ ! -e "$tmp/x.tsv" ] || { bad "synth $o wrote a corpus"; rm -f "$tmp/x.tsv"; }
done
expect "synth -n 1e2 (whole, written with an exponent)" 0 "" -- "$dm" synth -n 1e2 -k 3 -o "$tmp/x.tsv" --quiet
n=$(wc -l < "$tmp/x.tsv" 2>/dev/null || echo 0)
if [ "$n" -eq 100 ]; then ok "synth -n 1e2: 100 documents"; else bad "synth -n 1e2: $n documents"; fi
finish
