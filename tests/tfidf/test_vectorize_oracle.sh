#!/usr/bin/env bash
# An independent oracle for `docmine vectorize` and `docmine icf-build` (CPU backend): from the
# tokens docmine itself produces (`docmine preprocess --dump-tokens`), vectorize_oracle.py
# recomputes in pure Python the counts, df, vocabulary and term ids (byte order), idf (log and
# sklearn), sublinear tf, L2, min_df / max_df, the ICF table and TF-ICF weights, and compares them
# with the .dmv docmine writes (every weight to a relative 1e-6, ids, labels, row order), the
# vocabulary TSV, the SVMlight / MatrixMarket exports and the report's counters. Corpora: a
# Reuters-21578 subset (../shared/datasets or $DOCMINE_DATASETS; skipped when absent), synthetic
# corpora of `docmine synth`, and adversarial ones (empty documents, stop words only, a term in
# every document, one document, duplicates, very long documents, non-ASCII, odd ids and labels).
# Each is run on 1, 2 and 3 ranks and the files must be byte-identical.
# usage: test_vectorize_oracle.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
oracle=$here/vectorize_oracle.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-oracle-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$here/../testutil/cli_lib.sh"

# run <ranks> <docmine args...>: docmine on the CPU backend, quietly; stderr kept for failures
run() {
    local n=$1
    shift
    if [ "$n" -eq 1 ]; then "$dm" --backend cpu --quiet "$@" 2>"$tmp/err" >/dev/null
    else "$mpiexec" -n "$n" "$dm" --backend cpu --quiet "$@" 2>"$tmp/err" >/dev/null; fi
}
# orc <name> <oracle args...>: one check, the oracle's first lines when it disagrees
orc() {
    local name=$1 out
    shift
    if out=$(python3 "$oracle" "$@" 2>&1); then ok "$name"; else bad "$name: $(printf '%s' "$out" | head -12)"; fi
}

# dump <name> <ranks> <corpus args...>: the tokens of a corpus (1 rank) as the oracle's input; with
# <ranks> ranks the per-rank dumps, concatenated, must be the same documents in the same order
dump() {
    local name=$1 k=$2 r
    shift 2
    if ! run 1 preprocess "$@" --dump-tokens -o "$tmp/$name.tok"; then
        bad "$name: preprocess --dump-tokens: $(head -3 "$tmp/err")"
        return 1
    fi
    if run "$k" preprocess "$@" --dump-tokens -o "$tmp/$name.tokk" &&
        for ((r = 0; r < k; r++)); do cat "$tmp/$name.tokk.rank$r"; done | cmp -s - "$tmp/$name.tok"; then
        ok "$name: $k-rank token dump = 1-rank dump"
    else
        bad "$name: $k-rank token dump differs from the 1-rank dump"
    fi
}

# vec <name> <dump> <ranks list> <corpus args...> -- <vectorize options...>: vectorize on each rank
# count, the oracle (on the tokens of dump <dump>) on every file with its vocabulary, report and
# exports, and identical bytes for every rank count
vec() {
    local name=$1 tok=$2 ranks=$3
    shift 3
    local cargs=() opts=()
    while [ "$1" != "--" ]; do cargs+=("$1"); shift; done
    shift
    opts=("$@")
    local first="" n f
    for n in $ranks; do
        f=$tmp/$name.n$n.dmv
        if ! run "$n" vectorize "${cargs[@]}" "${opts[@]}" -o "$f" --vocab "$tmp/$name.voc" --report "$tmp/$name.json" \
            --export svmlight; then
            bad "$name [${opts[*]}], $n ranks: vectorize failed: $(head -3 "$tmp/err")"
            continue
        fi
        # the MatrixMarket export of the same vectors (once; the .dmv bytes are the same)
        [ -z "$first" ] && { run "$n" vectorize "${cargs[@]}" "${opts[@]}" -o "$tmp/$name.m.dmv" --export mtx ||
            bad "$name [${opts[*]}]: mtx export failed: $(head -3 "$tmp/err")"; }
        orc "$name [${opts[*]}], $n ranks: oracle" check --tokens "$tmp/$tok.tok" --dmv "$f" \
            --vocab "$tmp/$name.voc" --report "$tmp/$name.json" --svm "${f%.dmv}.svm" --mtx "$tmp/$name.m.mtx" "${opts[@]}"
        if [ -z "$first" ]; then first=$f
        else cmp -s "$first" "$f" && ok "$name [${opts[*]}]: $n ranks = 1 rank, byte for byte" \
            || bad "$name [${opts[*]}]: $n ranks differ from 1 rank"; fi
    done
}

# ---------------------------------------------------------------- the oracle is not blind
python3 "$oracle" gen "$tmp/adv" || bad "oracle gen"
dump every 2 --corpus "$tmp/adv/every"
run 1 vectorize --corpus "$tmp/adv/every" --no-l2 -o "$tmp/blind.dmv"
for wrong in "" "--no-l2 --sublinear" "--no-l2 --idf sklearn" "--no-l2 --max-df 0.5"; do
    python3 "$oracle" check --tokens "$tmp/every.tok" --dmv "$tmp/blind.dmv" $wrong >/dev/null 2>&1 \
        && bad "oracle accepts --no-l2 vectors as [$wrong]" || ok "oracle refuses --no-l2 vectors as [$wrong]"
done
# a weight changed by one float32 ulp-free amount (1e-5 relative), the checksums made right again
python3 - "$tmp/blind.dmv" "$tmp/blind2.dmv" <<'EOF'
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
n_rows, n_cols, nnz = struct.unpack_from("<3Q", b, 16)
o = 64 + 8 * (n_rows + 1) + 4 * nnz
struct.pack_into("<f", b, o, struct.unpack_from("<f", b, o)[0] * (1 + 1e-5))
struct.pack_into("<I", b, len(b) - 8, zlib.crc32(bytes(b[:-8])) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(b)
EOF
python3 "$oracle" check --tokens "$tmp/every.tok" --dmv "$tmp/blind2.dmv" --no-l2 >/dev/null 2>&1 \
    && bad "oracle accepts a weight off by 1e-5" || ok "oracle refuses a weight off by 1e-5"

# ---------------------------------------------------------------- adversarial corpora
# mixed: empty documents, stop words only, duplicates, multi-labels, unlabelled, non-ASCII
dump mixed 3 --corpus "$tmp/adv/mixed"
vec mixed mixed "1 2 3" --corpus "$tmp/adv/mixed" --
vec mixed.sk mixed "1 2" --corpus "$tmp/adv/mixed" -- --idf sklearn --sublinear
vec mixed.raw mixed "1" --corpus "$tmp/adv/mixed" -- --no-l2
vec mixed.df mixed "1 2" --corpus "$tmp/adv/mixed" -- --min-df 2 --max-df 0.5
# a term in every document: log idf 0, its entries not stored (tfidf.h) but the column kept and
# its tokens counted in tf's denominator (--no-l2 shows it)
vec every every "1 2" --corpus "$tmp/adv/every" -- --no-l2
vec every.sub every "1" --corpus "$tmp/adv/every" -- --sublinear
json "$tmp/every.json" 'r["zero_weight_entries"] == 25 and r["terms"] == 21' \
    && ok "every: 25 entries of weight 0 not stored, 21 columns" || bad "every: zero-weight entries"
# every document holds every term: every log-idf row is empty (no NaN from L2 of nothing)
dump allsame 2 --corpus "$tmp/adv/allsame"
vec allsame allsame "1 2" --corpus "$tmp/adv/allsame" --
json "$tmp/allsame.json" 'r["empty_docs"] == 6 and r["nnz"] == 0' && ok "allsame: 6 empty rows" || bad "allsame: empty rows"
vec allsame.sk allsame "1 2" --corpus "$tmp/adv/allsame" -- --idf sklearn
# one document (N = 1: every log idf is 0); 3 ranks, two of them without documents
dump one 2 --corpus "$tmp/adv/one"
vec one one "1 2 3" --corpus "$tmp/adv/one" --
vec one.sk one "1 2" --corpus "$tmp/adv/one" -- --idf sklearn --sublinear --no-l2
# very long documents (tens of thousands of tokens, one term thousands of times), small batches
dump long 2 --corpus "$tmp/adv/long"
vec long long "1 2" --corpus "$tmp/adv/long" -- --batch-bytes 1024
vec long.sub long "1" --corpus "$tmp/adv/long" -- --sublinear --min-df 2
# JSONL: ids with a line break, a tab, '#', duplicate ids, a missing id, labels with a space,
# arrays, a number, empty parts; non-ASCII and NFKC-folded text
mkdir -p "$tmp/js"
python3 - "$tmp/js/c.jsonl" <<'EOF'
import json, sys
rows = [{"id": "a\nb", "text": "market price oil", "label": "x y"},
        {"id": "t\tab", "text": "oil wheat grain", "labels": ["b", "a"]},
        {"id": "dup", "text": "oil wheat", "labels": ["a", "a"]},
        {"id": "dup", "text": "market market", "label": "a,,b"},
        {"id": "hash # x", "text": "grain grain bond", "label": 7},
        {"text": "the text of a record without an id: bond", "label": ""},
        {"id": "\u00e9", "text": "\u00dcn\u00efc\u00f6d\u00e9 w\u00f6rds \ufb01nance \uff26\uff35\uff2c\uff2c \u6771\u4eac", "labels": []}]
open(sys.argv[1], "w").write("\n".join(json.dumps(r) for r in rows) + "\n")
EOF
dump js 2 --corpus "$tmp/js"
vec js js "1 2" --corpus "$tmp/js" --

# a folder tree (labels from the first-level folder): many small files, a .gz, an empty file
# (skipped), a stop-word-only file, one large file, Greek; split by size between the ranks
mkdir -p "$tmp/tree/a" "$tmp/tree/b/sub" "$tmp/tree/c"
for i in $(seq 1 12); do printf 'market oil %s wheat %s\n' "$(seq -s ' ' "$i")" "$(seq -s ' x' "$i")" >"$tmp/tree/a/d$i.txt"; done
printf 'grain bank bank\n' | gzip >"$tmp/tree/b/g.txt.gz"
: >"$tmp/tree/b/empty.txt"
printf 'the of and\n' >"$tmp/tree/b/sub/stop.txt"
printf '\316\274\316\255\317\201\316\261 \316\272\316\261\316\273\316\256 oil\n' >"$tmp/tree/c/gr.txt"
yes 'trade deficit surplus oil' | head -5000 >"$tmp/tree/c/big.txt"
dump tree 2 --corpus "$tmp/tree" --labels dir
vec tree tree "1 2" --corpus "$tmp/tree" --labels dir --
# --min-len 1: "s" is a token and its Porter stem "" a term (id 0, first in byte order)
mkdir -p "$tmp/s1"
printf 'a\tx\tthe cats s sat\nb\ty\ts dogs sat s\nc\tz\tbirds s\n' >"$tmp/s1/s.tsv"
dump s1 2 --corpus "$tmp/s1" --min-len 1
vec s1 s1 "1 2" --corpus "$tmp/s1" --min-len 1 --
run 1 icf-build --corpus "$tmp/s1" --min-len 1 -o "$tmp/s1.icf" || bad "icf-build --min-len 1: $(head -3 "$tmp/err")"
orc "icf-build --min-len 1: oracle" icf --tokens "$tmp/s1.tok" --table "$tmp/s1.icf" --min-len 1

# from token streams of docmine preprocess -o (1 and 2 ranks), with options
run 1 preprocess --corpus "$tmp/adv/mixed" -o "$tmp/mixed.s1" || bad "preprocess -o, 1 rank: $(head -3 "$tmp/err")"
run 2 preprocess --corpus "$tmp/adv/mixed" -o "$tmp/mixed.s2" || bad "preprocess -o, 2 ranks: $(head -3 "$tmp/err")"
vec mixed.tok1 mixed "1" --tokens "$tmp/mixed.s1" -- --idf sklearn --min-df 2 --no-l2
vec mixed.tok2 mixed "2" --tokens "$tmp/mixed.s2" -- --sublinear --max-df 0.3

# ---------------------------------------------------------------- synthetic corpora
run 2 synth -n 400 -k 4 --min-words 5 --max-words 120 --topic-vocab 600 --shared-vocab 600 --seed 11 -o "$tmp/syn" \
    || bad "synth: $(head -3 "$tmp/err")"
dump syn 2 --corpus "$tmp/syn"
vec syn syn "1 2" --corpus "$tmp/syn" --
vec syn.sk syn "1 2 3" --corpus "$tmp/syn" -- --idf sklearn --sublinear --min-df 3 --max-df 0.25
vec syn.raw syn "1" --corpus "$tmp/syn" -- --no-l2 --max-df 0.1

# ---------------------------------------------------------------- Reuters-21578 subset
data=${DOCMINE_DATASETS:-${DOCMINE_SOURCE_DIR:-$here/../..}/../shared/datasets}/reuters21578
if [ -f "$data/reut2-000.sgm.gz" ] && [ -f "$data/reut2-013.sgm.gz" ]; then
    mkdir -p "$tmp/reu" "$tmp/reuref"
    d=$(cd "$data" && pwd)
    ln -s "$d/reut2-000.sgm.gz" "$d/reut2-013.sgm.gz" "$tmp/reu/"
    ln -s "$d/reut2-004.sgm.gz" "$tmp/reuref/"
    dump reu 3 --corpus "$tmp/reu" --format reuters
    vec reu reu "1 2 3" --corpus "$tmp/reu" --format reuters --
    vec reu.sk reu "1 2" --corpus "$tmp/reu" --format reuters -- --idf sklearn --min-df 0.002 --max-df 0.1
    vec reu.sub reu "1" --corpus "$tmp/reu" --format reuters -- --sublinear --no-l2 --min-df 3 --max-df 0.29
    # TF-ICF: a table of another Reuters file (terms of the target missing from it, others in it)
    dump reuref 2 --corpus "$tmp/reuref" --format reuters
    for n in 1 3; do
        run "$n" icf-build --corpus "$tmp/reuref" --format reuters -o "$tmp/reuref$n.icf" --vocab "$tmp/reuref$n.tsv" \
            || bad "reuters icf-build, $n ranks: $(head -3 "$tmp/err")"
        orc "reuters icf-build, $n ranks: oracle" icf --tokens "$tmp/reuref.tok" --table "$tmp/reuref$n.icf" \
            --vocab "$tmp/reuref$n.tsv"
    done
    cmp -s "$tmp/reuref1.icf" "$tmp/reuref3.icf" && ok "reuters icf-build: 1, 3 ranks byte for byte" || bad "reuters icf-build differs across rank counts"
    vec reu.icf reu "1 2 3" --corpus "$tmp/reu" --format reuters -- --icf "$tmp/reuref1.icf"
    vec reu.icfs reu "1 2" --corpus "$tmp/reu" --format reuters -- --icf "$tmp/reuref1.icf" --sublinear --batch-bytes 65536
    json "$tmp/reu.icf.json" 'r["icf_unknown_tokens"] > 0' && ok "reuters TF-ICF: tokens outside the table" \
        || bad "reuters TF-ICF: no unknown tokens (the case is not exercised)"
else
    echo "skipped: Reuters subset ($data/reut2-000.sgm.gz, reut2-013.sgm.gz not found)"
fi

# ---------------------------------------------------------------- TF-ICF on the other corpora
# a table of the mixed corpus: its N_ref counts the empty documents; weighing the JSONL corpus
# with it (some terms absent) and the mixed corpus itself
for n in 1 2; do
    run "$n" icf-build --corpus "$tmp/adv/mixed" -o "$tmp/mixed$n.icf" || bad "mixed icf-build, $n ranks: $(head -3 "$tmp/err")"
    orc "mixed icf-build, $n ranks: oracle" icf --tokens "$tmp/mixed.tok" --table "$tmp/mixed$n.icf"
done
cmp -s "$tmp/mixed1.icf" "$tmp/mixed2.icf" && ok "mixed icf-build: 1, 2 ranks byte for byte" || bad "mixed icf-build differs"
vec mixed.icf mixed "1 3" --corpus "$tmp/adv/mixed" -- --icf "$tmp/mixed1.icf" --no-l2
vec js.icf js "1 2" --corpus "$tmp/js" -- --icf "$tmp/mixed1.icf"
# a table where a term is in every reference document (icf 0: not stored)
run 1 icf-build --corpus "$tmp/adv/every" -o "$tmp/every.icf" --no-stem || bad "every icf-build --no-stem"
dump every.ns 2 --corpus "$tmp/adv/every" --no-stem
orc "icf-build --no-stem: oracle" icf --tokens "$tmp/every.ns.tok" --table "$tmp/every.icf" --no-stem
vec every.ns.icf every.ns "1 2" --corpus "$tmp/adv/every" --no-stem -- --icf "$tmp/every.icf"

finish
