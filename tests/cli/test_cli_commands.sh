#!/usr/bin/env bash
# `docmine stem` and `docmine preprocess` from the command line (the library's tests do not run
# these commands): Porter stems of known words on both host stemmers, the token dump of a small
# TSV corpus with each token option, a bad line counted or fatal (--strict), the binary stream and
# the report, the corpus order of a dump from 2 ranks, and the usage errors.
# usage: test_cli_commands.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
. "$(dirname "$0")/../testutil/cli_lib.sh"
same() { # same <name> <got> <expected>
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got"; printf '%s\n' "$2" | sed 's/^/    /'; echo "  expected"; printf '%s\n' "$3" | sed 's/^/    /'; fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=(--backend cpu)

# ---- stem ----------------------------------------------------------------------------------
long=$(printf 'x%.0s' $(seq 1 80))
words=$(printf '%s\n' caresses ponies ties running relational generalizations happy sky "" "naïve" "$long")
want=$(printf '%s\n' caress poni ti run relat gener happi sky "" "naïve" "$long")
same "stem: Porter stems (libstemmer)" "$(printf '%s\n' "$words" | "$dm" "${cpu[@]}" stem)" "$want"
same "stem --hd: our stemmer on the host" "$(printf '%s\n' "$words" | "$dm" "${cpu[@]}" stem --hd)" "$want"
same "stem: no input, no output" "$("$dm" "${cpu[@]}" stem </dev/null)" ""
same "stem: 2 ranks print once" "$(printf 'running\nponies\n' | "$mpiexec" -n 2 "$dm" "${cpu[@]}" stem)" "$(printf 'run\nponi')"
exits "stem: an argument" 2 "unexpected argument 'words.txt'" -- "$dm" "${cpu[@]}" stem words.txt

# ---- preprocess ----------------------------------------------------------------------------
printf 'd1\tsport\tThe runners were running quickly in 2024 races!\n' > "$tmp/c.tsv"
printf 'd2\tecon\tMarkets and relational generalizations; caresses ponies.\n' >> "$tmp/c.tsv"
printf 'a line without tabs\n' >> "$tmp/c.tsv"
printf 'd3\tsport\t\xc3\x89toile caf\xc3\xa9 na\xc3\xafve running\n' >> "$tmp/c.tsv"
pp() { "$dm" "${cpu[@]}" preprocess --corpus "$tmp/c.tsv" "$@"; }
want=$(printf 'd1\tsport\trunner run quickli race\nd2\tecon\tmarket relat gener caress poni\nd3\tsport\tetoil cafe naiv run')
same "preprocess: the dump (stop words, stems, accents folded)" "$(pp --dump-tokens 2>/dev/null)" "$want"
err=$(pp --dump-tokens 2>&1 >/dev/null)
if printf '%s\n' "$err" | grep -q "3 documents (3 labelled), 13 tokens, 1 skipped" &&
    printf '%s\n' "$err" | grep -q "skip (bad_tsv): .*c.tsv:3: expected id<TAB>label<TAB>text"; then
    ok "preprocess: the bad line is a counted skip naming file and line"
else bad "preprocess: the skip is not reported: $err"; fi
exits "preprocess --strict: the bad line is an error" 1 "c.tsv:3: expected id<TAB>label<TAB>text" -- pp --dump-tokens --strict
want=$(printf 'd1\tsport\tthe runners were running quickly in 2024 races\nd2\tecon\tmarkets and relational generalizations caresses ponies\nd3\tsport\tetoile cafe naive running')
same "preprocess: --no-stem --no-stopwords --keep-numbers --min-len 1" \
    "$(pp --dump-tokens --no-stem --no-stopwords --keep-numbers --min-len 1 2>/dev/null)" "$want"
printf 'markets\nrunning\nrunner\n' > "$tmp/stop.txt"
want=$(printf 'd1\tsport\tthe runner were quickli in race\nd2\tecon\tand relat gener caress poni\nd3\tsport\tetoil cafe naiv')
# the list replaces the built-in one and matches tokens, not stems ("runners" stays, as "runner")
same "preprocess: --stopwords FILE replaces the list (before stemming)" \
    "$(pp --dump-tokens --stopwords "$tmp/stop.txt" --min-len 2 2>/dev/null)" "$want"
out=$(pp --dump-tokens --max-len 5 2>/dev/null | cut -f3)
if [ -n "$(printf '%s' "$out" | tr -d ' \n')" ] && ! printf '%s\n' "$out" | tr ' ' '\n' | grep -q '^......'; then
    ok "preprocess: --max-len 5 keeps only short tokens"
else bad "preprocess: --max-len 5: $out"; fi
same "preprocess: --labels none" "$(pp --dump-tokens --labels none 2>/dev/null | cut -f1,2)" "$(printf 'd1\t\nd2\t\nd3\t')"
pp --dump-tokens -o "$tmp/dump.txt" 2>/dev/null
same "preprocess: --dump-tokens -o FILE" "$(cat "$tmp/dump.txt")" "$(pp --dump-tokens 2>/dev/null)"
if pp -o "$tmp/c.dmtok" --report "$tmp/r.json" 2>/dev/null && [ -s "$tmp/c.dmtok" ] &&
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"]
sys.exit(not (r["documents"] == 3 and r["tokens"] == 13 and r["skipped"]["bad_tsv"] == 1))' "$tmp/r.json"; then
    ok "preprocess: -o FILE and the report's counts"
else bad "preprocess: -o FILE / --report ($(cat "$tmp/r.json" 2>/dev/null | head -c 300))"; fi

# several files on 2 ranks: the dump in corpus order, one binary file a rank
mkdir -p "$tmp/dir/a" "$tmp/dir/b"
for i in 1 2 3 4 5 6; do
    d=a; [ $i -gt 3 ] && d=b
    printf 'Document %s talks about markets, running and relational %s-things.\n' "$i" "$(printf 'w%.0s' $(seq 1 $i))" > "$tmp/dir/$d/f$i.txt"
done
one=$("$dm" "${cpu[@]}" preprocess --corpus "$tmp/dir" --labels dir --dump-tokens 2>/dev/null)
two=$("$mpiexec" -n 2 "$dm" "${cpu[@]}" preprocess --corpus "$tmp/dir" --labels dir --dump-tokens 2>/dev/null)
if [ "$(printf '%s\n' "$one" | grep -c .)" -eq 6 ] && [ "$(printf '%s\n' "$one" | cut -f2 | sort -u | tr '\n' ' ')" = "a b " ]; then
    same "preprocess: 2 ranks dump in corpus order" "$two" "$one"
else bad "preprocess: the directory corpus: $one"; fi
# a dump of several MB (many messages a rank) from 3 ranks, the same bytes as from one
"$dm" synth -n 3000 -k 5 --seed 3 -o "$tmp/s" >/dev/null 2>&1
one=$("$dm" "${cpu[@]}" preprocess --corpus "$tmp/s" --dump-tokens 2>/dev/null | md5sum)
three=$("$mpiexec" -n 3 "$dm" "${cpu[@]}" preprocess --corpus "$tmp/s" --dump-tokens 2>/dev/null | md5sum)
lines=$("$dm" "${cpu[@]}" preprocess --corpus "$tmp/s" --dump-tokens 2>/dev/null | wc -l)
if [ "$lines" -eq 3000 ]; then same "preprocess: a large dump from 3 ranks" "$three" "$one"
else bad "preprocess: the synthetic corpus dumped $lines lines, expected 3000"; fi
rm -f "$tmp"/d.dmtok*
if "$mpiexec" -n 2 "$dm" "${cpu[@]}" preprocess --corpus "$tmp/dir" -o "$tmp/d.dmtok" 2>/dev/null &&
    [ -s "$tmp/d.dmtok.rank0" ] && [ -s "$tmp/d.dmtok.rank1" ] && [ ! -e "$tmp/d.dmtok" ]; then
    ok "preprocess: 2 ranks write FILE.rank0 and FILE.rank1"
else bad "preprocess: 2 ranks -o: $(ls "$tmp")"; fi

# with a GPU: the CUDA backend's stems and dump are the CPU backend's
if "$dm" info --backend auto 2>/dev/null | grep -q '^ranks .*backend cuda'; then
    same "stem: the CUDA kernel" "$(printf '%s\n' "$words" | "$dm" --backend cuda stem)" "$(printf '%s\n' "$words" | "$dm" "${cpu[@]}" stem)"
    same "preprocess: the CUDA backend's dump" "$("$dm" --backend cuda preprocess --corpus "$tmp/s" --dump-tokens 2>/dev/null | md5sum)" "$one"
fi

# usage errors (exit 2) and a missing corpus (exit 1, naming it)
exits "preprocess: no corpus" 2 "--corpus PATH is required" -- "$dm" "${cpu[@]}" preprocess -o x
exits "preprocess: no output" 2 "-o FILE or --dump-tokens is required" -- pp
exits "preprocess: bad --format" 2 "invalid --format 'csv'" -- pp --dump-tokens --format csv
exits "preprocess: bad --labels" 2 "invalid --labels 'x'" -- pp --dump-tokens --labels x
exits "preprocess: bad --min-len" 2 "invalid token length '0'" -- pp --dump-tokens --min-len 0
exits "preprocess: --min-len above --max-len" 2 "--min-len is above --max-len" -- pp --dump-tokens --min-len 4 --max-len 3
exits "preprocess: bad --batch-bytes" 2 "invalid --batch-bytes '100'" -- pp --dump-tokens --batch-bytes 100
same "preprocess: --stopwords none is --no-stopwords (as for vectorize)" \
    "$(pp --dump-tokens --stopwords none 2>/dev/null)" "$(pp --dump-tokens --no-stopwords 2>/dev/null)"
exits "preprocess: missing corpus" 1 "corpus $tmp/none.tsv: No such file" -- "$dm" "${cpu[@]}" preprocess --corpus "$tmp/none.tsv" --dump-tokens
exits "preprocess: missing stop list" 1 "$tmp/nostop.txt" -- pp --dump-tokens --stopwords "$tmp/nostop.txt"
finish
