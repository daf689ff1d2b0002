#!/usr/bin/env bash
# `docmine vectorize` and `docmine icf-build` end to end (CPU backend): the same .dmv bytes for
# 1, 2 and 4 ranks, exports and vocabulary written, TF-ICF with a matching table, and one-line
# errors with the right exit codes for a mismatched table, an all-stop-word corpus and bad options.
# usage: test_vectorize_cli.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-vec-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"

# a corpus of three TSV files of different sizes (4 ranks: one rank reads none)
mkdir -p "$tmp/corpus" "$tmp/stops"
words=(market price stock trade bank rate oil grain wheat export import dollar yen profit loss share
       merger acquisition company earnings quarter growth inflation central reserve bond yield)
gen() { # gen <file> <first> <count>
    local f=$1 i j n line
    : >"$f"
    for ((i = $2; i < $2 + $3; i++)); do
        line=""
        n=$(( (i * 7919) % 23 ))
        for ((j = 0; j < n; j++)); do line+="${words[$(( (i * 31 + j * j * 17) % ${#words[@]} ))]} "; done
        [ $((i % 11)) -eq 0 ] && line="the and of it"   # stop words only: an empty row
        printf 'doc%d\ttopic%d\t%s\n' "$i" $((i % 5)) "$line" >>"$f"
    done
}
gen "$tmp/corpus/a.tsv" 0 40
gen "$tmp/corpus/b.tsv" 40 150
gen "$tmp/corpus/c.tsv" 190 60
printf 's1\tx\tthe and of a\ns2\tx\tit is what it is, is it not?\n' >"$tmp/stops/s.tsv"

"$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/v1.dmv" --vocab "$tmp/vocab.tsv" \
    --export svmlight && ok "vectorize, 1 rank" || bad "vectorize, 1 rank"
for n in 2 4; do
    "$mpiexec" -n $n "$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/v$n.dmv" >/dev/null 2>&1 \
        && cmp -s "$tmp/v1.dmv" "$tmp/v$n.dmv" && ok "$n ranks: identical bytes" || bad "$n ranks: identical bytes"
done
[ -s "$tmp/v1.svm" ] && [ "$(grep -vc '^#' "$tmp/v1.svm")" -eq 250 ] && ok "svmlight: one line per document" \
    || bad "svmlight: one line per document"
[ "$(head -1 "$tmp/vocab.tsv")" = "$(printf 'id\tterm\tdf')" ] && [ "$(wc -l <"$tmp/vocab.tsv")" -gt 10 ] \
    && ok "vocabulary TSV" || bad "vocabulary TSV"
"$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/s.dmv" --idf sklearn --sublinear --min-df 2 \
    --max-df 0.9 --export mtx && head -1 "$tmp/s.mtx" | grep -q '^%%MatrixMarket matrix coordinate real general' \
    && ok "options and MatrixMarket" || bad "options and MatrixMarket"

# --min-df / --max-df given twice: the last one decides (a count after a fraction and back)
"$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/df1.dmv" --min-df 0.01 --max-df 240 \
    && "$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/df2.dmv" --min-df 1000 --min-df 0.01 \
        --max-df 0.001 --max-df 240 && cmp -s "$tmp/df1.dmv" "$tmp/df2.dmv" \
    && ok "repeated --min-df / --max-df: the last one applies" || bad "repeated --min-df / --max-df: the last one applies"
# a fraction is of N exactly: 0.29 of 100 documents keeps a term in 29 (0.29 x 100 < 29 in doubles)
mkdir -p "$tmp/frac"
for ((i = 0; i < 100; i++)); do
    printf 'f%d	x	filler %s\n' $i "$([ $i -lt 29 ] && echo wheat)"
done >"$tmp/frac/f.tsv"
"$dm" vectorize --backend cpu --quiet --corpus "$tmp/frac" -o "$tmp/frac.dmv" --max-df 0.29 --vocab "$tmp/frac.tsv" \
    && [ "$(tail -n +2 "$tmp/frac.tsv")" = "$(printf '0\twheat\t29')" ] \
    && ok "--max-df 0.29 of 100 documents keeps a term in 29" || bad "--max-df 0.29 of 100 documents keeps a term in 29"

# from token streams of docmine preprocess (1 and 2 ranks): the same vectors as from the corpus
"$dm" preprocess --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/tok1" >/dev/null 2>&1 \
    && "$dm" vectorize --backend cpu --quiet --tokens "$tmp/tok1" -o "$tmp/t1.dmv" && cmp -s "$tmp/v1.dmv" "$tmp/t1.dmv" \
    && ok "vectorize --tokens, 1 rank" || bad "vectorize --tokens, 1 rank"
"$mpiexec" -n 2 "$dm" preprocess --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/tok2" >/dev/null 2>&1 \
    && "$mpiexec" -n 2 "$dm" vectorize --backend cpu --quiet --tokens "$tmp/tok2" -o "$tmp/t2.dmv" \
    && cmp -s "$tmp/v1.dmv" "$tmp/t2.dmv" && ok "vectorize --tokens, 2 ranks" || bad "vectorize --tokens, 2 ranks"
expect "--tokens written by 2 ranks, read by 1" 2 "written by several ranks" -- \
    "$dm" vectorize --backend cpu --tokens "$tmp/tok2" -o "$tmp/x.dmv"
expect "--tokens with --icf" 2 "--icf needs --corpus" -- \
    "$dm" vectorize --backend cpu --tokens "$tmp/tok1" --icf "$tmp/v1.dmv" -o "$tmp/x.dmv"

# TF-ICF
"$mpiexec" -n 2 "$dm" icf-build --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/ref.icf" \
    && ok "icf-build, 2 ranks" || bad "icf-build, 2 ranks"
"$dm" icf-build --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/ref1.icf" && cmp -s "$tmp/ref.icf" "$tmp/ref1.icf" \
    && ok "icf-build: identical tables for 1 and 2 ranks" || bad "icf-build: identical tables for 1 and 2 ranks"
"$mpiexec" -n 4 "$dm" icf-build --backend cpu --quiet --corpus "$tmp/corpus" -o "$tmp/ref4.icf" --vocab "$tmp/ref4.tsv" \
    && cmp -s "$tmp/ref.icf" "$tmp/ref4.icf" && [ "$(head -1 "$tmp/ref4.tsv")" = "$(printf 'id\tterm\tcf')" ] \
    && ok "icf-build: identical tables for 1 and 4 ranks" || bad "icf-build: identical tables for 1 and 4 ranks"
expect "icf-build of an all-stop-word corpus, 2 ranks" 1 "no terms" -- \
    "$mpiexec" -n 2 "$dm" icf-build --backend cpu --corpus "$tmp/stops" -o "$tmp/x.icf"
head -c 100 "$tmp/ref.icf" >"$tmp/trunc.icf"
expect "truncated ICF table, 2 ranks" 1 "trunc.icf: not a valid docmine ICF table" -- \
    "$mpiexec" -n 2 "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --icf "$tmp/trunc.icf" -o "$tmp/x.dmv"
"$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" --icf "$tmp/ref.icf" -o "$tmp/i1.dmv" \
    && "$mpiexec" -n 4 "$dm" vectorize --backend cpu --quiet --corpus "$tmp/corpus" --icf "$tmp/ref.icf" -o "$tmp/i4.dmv" \
    && cmp -s "$tmp/i1.dmv" "$tmp/i4.dmv" && ok "vectorize --icf: identical bytes for 1 and 4 ranks" \
    || bad "vectorize --icf: identical bytes for 1 and 4 ranks"
# --min-len 1: "s" is a token and its Porter stem "" a term: the table icf-build writes is read
# (the reader refused an empty term)
mkdir -p "$tmp/sdocs" && printf 'a\tx\tthe cats s sat\nb\ty\ts dogs sat\n' > "$tmp/sdocs/s.tsv"
"$dm" icf-build --backend cpu --quiet --min-len 1 --corpus "$tmp/sdocs" -o "$tmp/s.icf" \
    && "$dm" vectorize --backend cpu --quiet --min-len 1 --corpus "$tmp/sdocs" --icf "$tmp/s.icf" -o "$tmp/s.dmv" \
    && ok "icf-build --min-len 1: a table with the empty stem is read" || bad "icf-build --min-len 1: a table with the empty stem is read"
"$dm" icf-build --backend cpu --quiet --corpus "$tmp/corpus" --no-stem -o "$tmp/nostem.icf" >/dev/null 2>&1
expect "mismatched ICF table" 2 "nostem.icf does not match this corpus: the table was built without stemming" -- \
    "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --icf "$tmp/nostem.icf" -o "$tmp/x.dmv"
expect "mismatched ICF table, 2 ranks" 2 "does not match this corpus" -- \
    "$mpiexec" -n 2 "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --icf "$tmp/nostem.icf" -o "$tmp/x.dmv"
expect "vector file as ICF table" 1 "not a valid docmine ICF table" -- \
    "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --icf "$tmp/v1.dmv" -o "$tmp/x.dmv"
expect "--icf with --idf" 2 "do not apply" -- \
    "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --icf "$tmp/ref.icf" --idf sklearn -o "$tmp/x.dmv"

# bad input
expect "all stop words" 1 "no terms in any of the 2 documents" -- \
    "$dm" vectorize --backend cpu --corpus "$tmp/stops" -o "$tmp/x.dmv"
expect "all stop words, 2 ranks" 1 "no terms" -- \
    "$mpiexec" -n 2 "$dm" vectorize --backend cpu --corpus "$tmp/stops" -o "$tmp/x.dmv"
expect "missing corpus" 2 "missing --corpus" -- "$dm" vectorize --backend cpu -o "$tmp/x.dmv"
expect "corpus does not exist" 1 "$tmp/nope" -- "$dm" vectorize --backend cpu --corpus "$tmp/nope" -o "$tmp/x.dmv"
expect "bad --min-df" 2 "invalid --min-df" -- "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --min-df 1.5 -o "$tmp/x.dmv"
expect "bad --export" 2 "invalid --export" -- "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --export csv -o "$tmp/x.dmv"
expect "contradictory df" 2 "max_df corresponds to fewer documents" -- \
    "$dm" vectorize --backend cpu --corpus "$tmp/corpus" --min-df 100 --max-df 10 -o "$tmp/x.dmv"
[ ! -e "$tmp/x.dmv" ] && [ ! -e "$tmp/x.icf" ] && ok "no output after errors" || bad "no output after errors"
ls "$tmp"/*.tmp.* >/dev/null 2>&1 && bad "temporary files left" || ok "no temporary files left"
finish
