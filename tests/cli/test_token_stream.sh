#!/usr/bin/env bash
# Token stream files from the command line (CPU backend, 1-3 ranks): every file of one
# `docmine preprocess` run carries the run's id, and `vectorize --tokens` refuses a set whose files
# come from different runs with as many ranks (a leftover STREAM.rank1 of another corpus), on every
# rank, in one line naming the files, without a hang; the messages of a set read with another
# number of ranks (more, fewer, one rank reading a several-rank set or one of its files, several
# ranks reading a one-rank stream); preprocess with several ranks removes a one-rank run's token
# stream FILE (never another file of that name); a file of format version 2 is refused naming the
# version; a stop-word file line of several words is an error naming file and line, a word the
# tokeniser splits drops each part.
# usage: test_token_stream.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-tokstream-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"
mkcorpus() { # mkcorpus <file> <documents> <id prefix> <topic offset>: JSON Lines
    python3 - "$@" <<'PY'
import json, random, sys
f, n, p, t0 = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
random.seed(11 + t0)
T = [["oil", "crude", "barrel", "opec"], ["wheat", "grain", "corn", "harvest"], ["bank", "rate", "loan", "credit"],
     ["goal", "match", "league", "striker"]]
with open(f, "w") as o:
    for i in range(n):
        t = (i + t0) % 4
        o.write(json.dumps({"id": "%s%d" % (p, i), "label": "t%d" % t,
                            "text": " ".join(random.choice(T[t]) for _ in range(20))}) + "\n")
PY
}
dm1=("$dm" --backend cpu)
# every multi-rank command under a timeout: a rank left waiting in a collective fails the check
# (exit 124) instead of hanging the test
dmn() { local n=$1; shift; timeout 120 "$mpiexec" -n "$n" "$dm" --backend cpu "$@"; }
cd "$tmp" || exit 1
mkdir a b
for i in 0 1; do mkcorpus "a/p$i.jsonl" 60 "a${i}_" 0; mkcorpus "b/p$i.jsonl" 40 "b${i}_" 2; done

# ---- 1. the run id: files of two runs with as many ranks are not one set -----------------------
dmn 2 preprocess --quiet --corpus a -o s.tok 2>/dev/null && cp s.tok.rank1 a.rank1
dmn 2 preprocess --quiet --corpus b -o s.tok 2>/dev/null
dmn 2 vectorize --quiet --tokens s.tok -o v.dmv --report v.json >/dev/null 2>&1
check "vectorize --tokens, 2 ranks, one run's files: corpus b's 80 documents" 'json v.json "r[\"docs\"] == 80"'
cp a.rank1 s.tok.rank1 # rank 1 of 2 of corpus a's run: the right rank and ranks, another run
expect "vectorize --tokens: STREAM.rank1 of another run with as many ranks refused" 1 \
    "s.tok.rank1: written by another docmine preprocess run \(run id [0-9a-f]{16}\) than s.tok.rank0 \(run id [0-9a-f]{16}\): the files are of different runs" -- \
    dmn 2 vectorize --tokens s.tok -o x.dmv
check "... and no output written" '[ ! -e x.dmv ]'
dmn 2 preprocess --quiet --corpus a -o s.tok 2>/dev/null && cp a.rank1 s.tok.rank1
expect "vectorize --tokens: the same corpus preprocessed again is another run too" 1 \
    "s.tok.rank1: written by another docmine preprocess run .* than s.tok.rank0" -- dmn 2 vectorize --tokens s.tok -o x.dmv
dmn 3 preprocess --quiet --corpus a -o t.tok 2>/dev/null && cp t.tok.rank1 t3.rank1
dmn 3 preprocess --quiet --corpus b -o t.tok 2>/dev/null && cp t3.rank1 t.tok.rank1
expect "vectorize --tokens, 3 ranks: the middle rank's file of another run" 1 \
    "t.tok.rank1: written by another docmine preprocess run" -- dmn 3 vectorize --tokens t.tok -o x.dmv
id0=$(od -An -tx8 -j24 -N8 t.tok.rank0 | tr -d ' ')
id2=$(od -An -tx8 -j24 -N8 t.tok.rank2 | tr -d ' ')
check "the files of one run carry one run id (rank 0's, offset 24)" '[ -n "$id0" ] && [ "$id0" = "$id2" ] && [ "$id0" != 0000000000000000 ]'

# ---- 2. another number of ranks ------------------------------------------------------------------
dmn 2 preprocess --quiet --corpus b -o s.tok 2>/dev/null
expect "3 ranks read a 2-rank set" 2 "s.tok was written by 2 ranks \(s.tok.rank0\): run vectorize with 2 ranks" -- \
    dmn 3 vectorize --tokens s.tok -o x.dmv
expect "1 rank reads a 2-rank set" 2 "s.tok was written by several ranks \(s.tok.rank0\): run vectorize with 2 ranks" -- \
    "${dm1[@]}" vectorize --tokens s.tok -o x.dmv
expect "1 rank reads one file of a 2-rank set" 2 \
    "s.tok.rank1 is rank 1's file of a token stream written by 2 ranks: run vectorize with 2 ranks, naming the stream without its .rank1" -- \
    "${dm1[@]}" vectorize --tokens s.tok.rank1 -o x.dmv
"${dm1[@]}" preprocess --quiet --corpus a -o one.tok 2>/dev/null
expect "2 ranks read a 1-rank stream" 2 "one.tok was written by 1 rank \(one.tok\): run vectorize with 1 rank" -- \
    dmn 2 vectorize --tokens one.tok -o x.dmv
"${dm1[@]}" vectorize --quiet --tokens one.tok -o one.dmv --report one.json >/dev/null 2>&1
check "1 rank reads a 1-rank stream" 'json one.json "r[\"docs\"] == 120"'
err=$(dmn 2 preprocess --corpus a -o one.tok 2>&1 >/dev/null)
check "preprocess, 2 ranks: an earlier 1-rank run's one.tok removed, and said" \
    '[ ! -e one.tok ] && [ -s one.tok.rank1 ] && printf "%s" "$err" | grep -q "removed one.tok: an earlier one-rank run"' "$err"
expect "... so that 1 rank is told the stream is of 2 ranks, not given the older one" 2 \
    "one.tok was written by several ranks \(one.tok.rank0\): run vectorize with 2 ranks" -- \
    "${dm1[@]}" vectorize --tokens one.tok -o x.dmv
echo "not a token stream" >keep.tok
dmn 2 preprocess --quiet --corpus a -o keep.tok 2>/dev/null
check "preprocess, 2 ranks: a file FILE that is no token stream stays" '[ "$(cat keep.tok)" = "not a token stream" ] && [ -s keep.tok.rank0 ]'

# ---- 3. an older format ----------------------------------------------------------------------------
# version 2 = version 3 without the run id (bytes 24..31), checksum made right
python3 - one.tok.rank0 v2.tok <<'PY'
import sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
assert b[8] == 3
b = b[:24] + b[32:]
b[8] = 2
b[-8:-4] = (zlib.crc32(bytes(b[:-8])) & 0xffffffff).to_bytes(4, "little")
open(sys.argv[2], "wb").write(bytes(b))
PY
expect "a version 2 file refused naming it and the version" 1 \
    "v2.tok: token stream of format version 2 \(an older docmine, without the run id\): run docmine preprocess again" -- \
    "${dm1[@]}" vectorize --tokens v2.tok -o x.dmv

# ---- 4. stop-word files: one word a line ----------------------------------------------------------
printf 'd1\tx\tNew York is new; I don'"'"'t e-mail from York\n' >c.tsv
printf '# places\nparis\nnew york\n' >phrase.txt
expect "preprocess: a stop-word line of several words" 1 \
    "stop words phrase.txt:3: \"new york\" is several words: a stop-word list has one word a line" -- \
    "${dm1[@]}" preprocess --corpus c.tsv --stopwords phrase.txt --dump-tokens
expect "vectorize, 2 ranks: the same error once" 1 "stop words phrase.txt:3: \"new york\" is several words" -- \
    dmn 2 vectorize --corpus c.tsv --stopwords phrase.txt -o x.dmv
expect "pipeline: the same error" 1 "stop words phrase.txt:3: \"new york\" is several words" -- \
    "${dm1[@]}" pipeline --quiet --corpus c.tsv --stopwords phrase.txt --method streamclust -o pout
printf "new\r\n  don't  # split by the tokeniser\nyork\n" >words.txt # ("is" stems to "i")
got=$("${dm1[@]}" preprocess --corpus c.tsv --stopwords words.txt --min-len 1 --dump-tokens 2>/dev/null)
check "a word the tokeniser splits drops every part; CRLF, blanks, comments" \
    '[ "$got" = "$(printf "d1\tx\ti i e mail from")" ]' "$got"

finish
