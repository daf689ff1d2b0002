#!/usr/bin/env bash
# What the commands make of their inputs, end to end (CPU backend, 1-3 ranks): a token stream's
# files are one run's (preprocess removes the FILE.rank<r> an earlier run with more ranks left;
# vectorize --tokens refuses files of different runs, naming one); a FIFO named as an input file
# (--stopwords, --tokens, --vectors, --icf, --input) fails at once, never waits; preprocess,
# vectorize, pipeline and icf-build print the skips per reason with the first messages of every
# rank, and put both in report.json; a corpus without documents is a runtime error (exit 1) that
# says why; the token dump keeps one line a document whatever its id and labels hold, and replaces
# FILE atomically; a record with empty text is kept and counted.
# usage: test_cli_inputs.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-inputs-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"
mkcorpus() { # mkcorpus <file> <documents> <id prefix>: JSON Lines of three topics
    python3 - "$@" <<'PY'
import json, random, sys
f, n, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
random.seed(7)
T = [["oil", "crude", "barrel", "opec"], ["wheat", "grain", "corn", "harvest"], ["bank", "rate", "loan", "credit"]]
with open(f, "w") as o:
    for i in range(n):
        o.write(json.dumps({"id": "%s%d" % (p, i), "label": "t%d" % (i % 3),
                            "text": " ".join(random.choice(T[i % 3]) for _ in range(20))}) + "\n")
PY
}
dm1=("$dm" --backend cpu)
dmn() { local n=$1; shift; "$mpiexec" -n "$n" "$dm" --backend cpu "$@"; }
cd "$tmp" || exit 1

# ---- 1. a token stream's files are one run's -----------------------------------------------
mkdir c
for i in 0 1 2 3 4 5; do mkcorpus "c/p$i.jsonl" 50 "p${i}_"; done
dmn 3 preprocess --quiet --corpus c -o s.tok 2>/dev/null && cp s.tok.rank1 three.rank1
err=$(dmn 2 preprocess --corpus c -o s.tok 2>&1 >/dev/null)
check "preprocess, 2 ranks: the 3-rank run's s.tok.rank2 removed, and said" \
    '[ -s s.tok.rank0 ] && [ -s s.tok.rank1 ] && [ ! -e s.tok.rank2 ] && printf "%s" "$err" | grep -q "removed s.tok.rank2"' "$err"
dmn 2 vectorize --quiet --tokens s.tok -o v.dmv --report v.json >/dev/null 2>&1
check "vectorize --tokens, 2 ranks: the 300 documents of the corpus" 'json v.json "r[\"docs\"] == 300"'
expect "vectorize --tokens, 3 ranks: the set is of 2 ranks" 2 "s.tok was written by 2 ranks \(s.tok.rank0\)" -- \
    dmn 3 vectorize --tokens s.tok -o x.dmv
cp three.rank1 s.tok.rank1
expect "vectorize --tokens: a file of another run in the set" 1 \
    "s.tok.rank1: written by rank 1 of a 3-rank run, not by rank 1 of the 2-rank run .*different runs" -- \
    dmn 2 vectorize --tokens s.tok -o x.dmv
"${dm1[@]}" preprocess --quiet --corpus c -o s.tok 2>/dev/null
check "preprocess, 1 rank: writes s.tok, removes every s.tok.rank<r>" '[ -s s.tok ] && ! ls s.tok.rank* >/dev/null 2>&1'
: >s.tok.rank01 && : >s.tok.rankx && "${dm1[@]}" preprocess --quiet --corpus c -o s.tok 2>/dev/null
check "preprocess: names not of its own rank files stay" '[ -e s.tok.rank01 ] && [ -e s.tok.rankx ]'
dmn 2 preprocess --quiet --corpus c --dump-tokens -o dir.txt 2>/dev/null
: >dir.txt.rank5 && "${dm1[@]}" preprocess --quiet --corpus c --dump-tokens -o "$tmp/dir.txt" 2>/dev/null
check "preprocess --dump-tokens -o: the same for dumps" '[ -s dir.txt ] && ! ls dir.txt.rank* >/dev/null 2>&1'

# ---- 2. a FIFO named as an input fails at once -----------------------------------------------
dmn 2 preprocess --quiet --corpus c -o two.tok 2>/dev/null
mkdir sub && mkfifo fifo ff.rank1 && cp two.tok.rank0 ff.rank0
expect "--stopwords FIFO" 1 "stop words fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "${dm1[@]}" preprocess --corpus c --stopwords fifo --dump-tokens
expect "--stopwords FIFO, 2 ranks" 1 "stop words fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "$mpiexec" -n 2 "$dm" --backend cpu vectorize --corpus c --stopwords fifo -o x.dmv
expect "--tokens FIFO" 1 "fifo: not a regular file \(a FIFO\)" -- timeout 60 "${dm1[@]}" vectorize --tokens fifo -o x.dmv
expect "--tokens with a FIFO for rank 1" 1 "ff.rank1: not a regular file \(a FIFO\)" -- \
    timeout 60 "$mpiexec" -n 2 "$dm" --backend cpu vectorize --tokens ff -o x.dmv
# every other named input file too: vectors, an ICF table, streamclust's points
expect "streamclust --vectors FIFO" 1 "fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "${dm1[@]}" streamclust 2 4 16 0 100 100 --vectors fifo -o sco
expect "flock --vectors FIFO, 2 ranks" 1 "fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "$mpiexec" -n 2 "$dm" --backend cpu flock --vectors fifo -o flo
expect "vectorize --icf FIFO" 1 "fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "${dm1[@]}" vectorize --corpus c --icf fifo -o x.dmv
expect "streamclust --input FIFO" 1 "fifo: not a regular file \(a FIFO\)" -- \
    timeout 60 "${dm1[@]}" streamclust 2 4 16 10 100 100 --input fifo -o sco
expect "--stopwords a directory" 1 "stop words sub: not a regular file \(a directory\)" -- \
    "${dm1[@]}" preprocess --corpus c --stopwords sub --dump-tokens

# ---- 3, 4. the skips of every rank, printed and reported by every command ------------------------
mkdir k
mkcorpus k/a.jsonl 40 d
gzip -c k/a.jsonl | head -c 800 >k/b.jsonl.gz   # truncated: read by a rank > 0 with 3 ranks
printf 'not gzip' >k/c.jsonl.gz
skips() { # skips <name> <command word> <stderr> <report> <the report's object, as python>
    local e=$3 q="$5[\"skipped\"][\"corrupt_gzip\"] == 2 and $5[\"messages_total\"] == 2"
    q+=" and \"b.jsonl.gz\" in $5[\"messages\"][0] and \"c.jsonl.gz\" in $5[\"messages\"][1]"
    if printf '%s\n' "$e" | grep -q "^docmine $2: 2 skipped: 2 corrupt_gzip$"; then ok "$1: the skips per reason"
    else bad "$1: the skips per reason: $e"; fi
    if printf '%s\n' "$e" | grep -q "^docmine $2: skip (corrupt_gzip): k/b.jsonl.gz: truncated" &&
        printf '%s\n' "$e" | grep -q "^docmine $2: skip (corrupt_gzip): k/c.jsonl.gz: "; then ok "$1: the messages of every rank"
    else bad "$1: the messages of every rank: $e"; fi
    if json "$4" "$q"; then ok "$1: report.json"; else bad "$1: report.json"; fi
}
for n in 1 3; do
    e=$(dmn $n preprocess --corpus k -o t.tok --report p$n.json 2>&1 >/dev/null)
    skips "preprocess, $n rank(s)" preprocess "$e" p$n.json r
    e=$(dmn $n vectorize --quiet --corpus k -o t.dmv --report v$n.json 2>&1 >/dev/null)
    skips "vectorize, $n rank(s)" vectorize "$e" v$n.json r
done
for n in 1 2; do
    e=$(dmn $n pipeline --quiet --corpus k --method streamclust --k 2,3 -o out$n 2>&1 >/dev/null)
    skips "pipeline, $n rank(s)" pipeline "$e" out$n/report.json 'r["preprocess"]'
done
"${dm1[@]}" icf-build --quiet --corpus c -o c.icf 2>/dev/null
e=$("${dm1[@]}" vectorize --quiet --corpus k --icf c.icf -o i.dmv --report i.json 2>&1 >/dev/null)
skips "vectorize --icf" vectorize "$e" i.json r
e=$(dmn 2 icf-build --quiet --corpus k -o k.icf --report b.json 2>&1 >/dev/null)
skips "icf-build, 2 ranks" icf-build "$e" b.json r

# ---- 5. a corpus without documents: why, and exit 1 ----------------------------------------------
mkdir nd empty
gzip -c k/a.jsonl | head -c 800 >nd/t.jsonl.gz
why="corpus nd: no documents, 1 skipped \(1 corrupt_gzip\); the first: nd/t.jsonl.gz: truncated gzip data"
expect "preprocess: no documents" 1 "$why" -- "${dm1[@]}" preprocess --corpus nd -o x.tok
expect "preprocess: no documents, 2 ranks" 1 "$why" -- dmn 2 preprocess --corpus nd -o x.tok
expect "vectorize: no documents" 1 "$why" -- "${dm1[@]}" vectorize --corpus nd -o x.dmv
expect "vectorize --icf: no documents" 1 "$why" -- "${dm1[@]}" vectorize --corpus nd --icf c.icf -o x.dmv
expect "pipeline: no documents" 1 "$why" -- "${dm1[@]}" pipeline --quiet --corpus nd --method streamclust -o x
expect "an empty folder" 1 "corpus empty: no documents \(0 files read, nothing skipped\)" -- \
    "${dm1[@]}" preprocess --corpus empty --dump-tokens
expect "no file of the --format" 1 "corpus k: no documents: 0 files read, 3 ignored \(not of the --format\)" -- \
    "${dm1[@]}" preprocess --corpus k --format reuters --dump-tokens

# ---- 6. the token dump; empty records ------------------------------------------------------------
printf '{"id":"a\\tb","label":"x\\ny","text":"oil crude"}\n{"id":"e","text":""}\n' >d.jsonl
got=$("${dm1[@]}" preprocess --corpus d.jsonl --dump-tokens --report d.json 2>err.txt)
check "dump: a tab or line break in an id or label stays in its field" \
    '[ "$got" = "$(printf "a b\tx y\toil crude\ne\t\t")" ]' "$(printf '%s' "$got" | cat -A)"
check "a record with empty text: kept and counted" 'grep -q "2 documents (1 labelled, 1 without tokens)" err.txt &&
    json d.json "r[\"documents_empty\"] == 1 and r[\"documents\"] == 2 and \"empty_doc\" not in r[\"skipped\"]"' "$(cat err.txt)"
echo old >kept.txt && ln kept.txt dump.txt
"${dm1[@]}" preprocess --corpus d.jsonl --dump-tokens -o dump.txt 2>/dev/null
check "dump -o FILE: replaced, never written in place" '[ "$(cat kept.txt)" = old ] && [ "$(cat dump.txt)" = "$got" ] &&
    ! ls dump.txt.tmp* >/dev/null 2>&1'

# ---- 7. reader messages name the file by the path as given, then member and line ----------------
mkdir -p m/sub
python3 - "$tmp/m/a.tgz" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as t:
    for name, data in (("./docs/x.jsonl", b'{"text":"oil crude"}\n{bad\n'), ("./docs/y.txt", b"wheat grain")):
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
PY
printf '{"text":"corn"}\n{"text":"bank","labels":["a,b"]}\n' | gzip >m/sub/g.jsonl.gz && printf 'junk' >>m/sub/g.jsonl.gz
e=$("${dm1[@]}" preprocess --corpus "$tmp/m" --dump-tokens -o m.txt 2>&1)
check "messages: an archive member's line, by the corpus path as given" \
    'printf "%s\n" "$e" | grep -qF "skip (bad_json): $tmp/m/a.tgz: member ./docs/x.jsonl:2: "' "$e"
check "messages: a .gz's line, its trailing garbage (its documents read)" \
    'printf "%s\n" "$e" | grep -qF "skip (bad_json): $tmp/m/sub/g.jsonl.gz:2: label 1 of the array, \"a,b\", holds a comma" &&
    printf "%s\n" "$e" | grep -qF "skip (corrupt_gzip): $tmp/m/sub/g.jsonl.gz: 4 bytes of trailing garbage after the gzip data" &&
    printf "%s\n" "$e" | grep -q "3 documents"' "$e"
check "ids: relative to the corpus, archive members without ./" \
    '[ "$(cut -f1 m.txt | tr "\n" " ")" = "a.tgz/docs/x.jsonl:1 a.tgz/docs/y.txt sub/g.jsonl:1 " ]' "$(cat m.txt)"

# ---- 8. a corpus path that is not UTF-8 (Latin-1 names): report.json keeps it and its messages --
mkdir "caf$(printf '\351')" && printf 'oil crude\n' >"caf$(printf '\351')/a.txt" && printf 'x' >"caf$(printf '\351')/b.txt.gz"
"${dm1[@]}" vectorize --corpus "caf$(printf '\351')" -o l1.dmv --report l1.json 2>/dev/null
check "report.json: a Latin-1 corpus path and its skip message kept, the byte escaped" \
    'json l1.json "len(r[\"messages\"]) == 1 and \"caf\\\\xE9/b.txt.gz\" in r[\"messages\"][0]" &&
    python3 -c "import json,sys; sys.exit(\"caf\\\\xE9\" not in json.load(open(\"l1.json\"))[\"command_line\"])"' "$(cat l1.json 2>&1 | head -c 600)"

# ---- 9. the directory walk: a folder reached twice is read once; ids unique whatever the ranks ----
# all -> news sorts before news, l1 and l2 lead to one folder outside the corpus, news/sub/up is a
# loop; a.txt and a.txt.gz (both "a.txt" without the suffix) fall to different ranks with 2
mkdir -p w/news/sub wext && printf 'oil crude\n' >w/news/a.txt && printf 'wheat grain\n' | gzip >w/news/a.txt.gz
printf 'bank loan\n' >wext/c.txt
ln -s "$tmp/w/news" w/all && ln -s "$tmp/wext" w/l1 && ln -s "$tmp/wext" w/l2 && ln -s "$tmp/w/news" w/news/sub/up
for n in 1 2; do
    e=$(dmn $n preprocess --corpus w --labels dir --dump-tokens -o w$n.txt --report w$n.json 2>&1 >/dev/null)
    got=$(cat w$n.txt w$n.txt.rank* 2>/dev/null | cut -f1,2 | tr "\t\n" ": ")
    check "walk, $n rank(s): every folder read once, at its own path; ids unique" \
        '[ "$got" = "l1/c.txt:l1 news/a.txt:news news/a.txt.gz:news " ]' "$got"
    check "walk, $n rank(s): second ways counted as duplicate_dir, the loop as symlink_loop" \
        'json w$n.json "r[\"skipped\"][\"duplicate_dir\"] == 2 and r[\"skipped\"][\"symlink_loop\"] == 1" &&
        printf "%s\n" "$e" | grep -qF "skip (duplicate_dir): w/all: the folder w/news, already read there (not read twice)" &&
        printf "%s\n" "$e" | grep -qF "skip (symlink_loop): w/news/sub/up: symbolic link loop: leads back to w/news, which holds it"' "$e"
done

finish
