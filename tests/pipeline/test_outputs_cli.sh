#!/usr/bin/env bash
# The result files users read (DESIGN.md section 8), end to end on the CPU backend, from small
# hand-made corpora whose document ids and labels hold tabs, newlines, quotes, commas, leading
# quotes, non-UTF-8 bytes, multi-label lists and missing labels:
# - assignments.tsv (read without quoting: tabs and line breaks became spaces) and positions.csv
#   (RFC 4180 quoting) have one row per document with the right columns, for `docmine flock`,
#   `docmine streamclust --vectors` and `docmine pipeline --method streamclust`;
# - the quality in report.json is the textbook NMI (arithmetic-mean normalisation), ARI
#   (Hubert-Arabie) and purity, recomputed here in Python from assignments.tsv with the class of a
#   document its first label, unlabelled documents skipped and noise (-1) one cluster;
# - every document noise: NMI 0, ARI 0 against two classes, clusters.tsv's -1 row holds them all;
# - a vocabulary with CR LF line ends (--vocab): term names without the CR, blank and comment lines
#   skipped as with LF, and an error names the file's own line number (counted twice per line before).
set -uo pipefail
dm=$1
. "$(dirname "$0")/../testutil/cli_lib.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=1
command -v python3 > /dev/null || { echo "python3 not found: skipped"; exit 0; }

# --- corpora: three topics; awkward ids and labels ------------------------------------------------
mkdir -p "$t/cj" "$t/ct"
python3 - "$t" <<'EOF'
import json, random, sys
t = sys.argv[1]
random.seed(11)
topics = {'sport': 'football goal match team player score league coach referee stadium'.split(),
          'money': 'bank stock market price trade invest profit share dollar economy'.split(),
          'space': 'rocket orbit planet star moon launch nasa galaxy astronaut telescope'.split()}
ids = ['plain', 'with,comma', 'with"quote', '"lead quote', 'tab\there', 'new\nline', 'cr\rret', 'ünï', ' lead', 'trail ']
k = 0
with open(t + '/cj/c.jsonl', 'w') as f:
    for name, words in topics.items():
        for i in range(40):
            lab = [name] if i % 4 else [name, 'other']    # multi-label: the first counts
            if i == 5: lab = []                            # unlabelled
            if i == 6: lab = [name.upper()]                # another class (case matters)
            if i == 7: lab = [name + '\tx']                # a tab in a label
            f.write(json.dumps({'id': '%s-%d' % (ids[k % len(ids)], k), 'label': lab,
                                'text': ' '.join(random.choice(words) for _ in range(30))}) + '\n')
            k += 1
with open(t + '/ct/c.tsv', 'wb') as f:                     # non-UTF-8 ids and labels
    for name, words in topics.items():
        for i in range(40):
            did = b'id\xff\xfe%d' % k if i % 3 == 0 else b'"q,%d' % k
            lab = name.encode() + (b'\xe9' if i % 5 == 0 else b'')
            f.write(did + b'\t' + lab + b'\t' + ' '.join(random.choice(words) for _ in range(30)).encode() + b'\n')
            k += 1
EOF

# --- the checker: rows, columns, and the quality recomputed ---------------------------------------
cat > "$t/check.py" <<'EOF'
import csv, json, math, sys
from collections import Counter
out, ndocs, ccol, ncols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
op = lambda p: open(p, newline='', encoding='utf-8', errors='surrogateescape')
rows = list(csv.reader(op(out + '/assignments.tsv'), delimiter='\t', quoting=csv.QUOTE_NONE))
errs = []
if len(rows) != ndocs + 1: errs.append('assignments.tsv: %d rows for %d documents' % (len(rows) - 1, ndocs))
if set(map(len, rows)) != {ncols}: errs.append('assignments.tsv: columns %s, expected %d' % (set(map(len, rows)), ncols))
rows = rows[1:]
try:
    pos = list(csv.reader(op(out + '/positions.csv')))
    if len(pos) != ndocs + 1 or set(map(len, pos)) != {5}:
        errs.append('positions.csv: %d rows, columns %s' % (len(pos) - 1, set(map(len, pos))))
    # the CSV keeps tabs and line breaks (quoted), the TSV has spaces for them
    elif ([r[0].translate({9: 32, 10: 32, 13: 32}) for r in pos[1:]] != [r[0] for r in rows] or
          [r[3] for r in pos[1:]] != [r[ccol] for r in rows]):
        errs.append('positions.csv: ids or clusters differ from assignments.tsv')
except FileNotFoundError:
    pass
first = [r[1].split(',')[0] for r in rows]
names = sorted(set(x for x in first if x))
pairs = [(names.index(c), int(r[ccol])) for c, r in zip(first, rows) if c]
N = len(pairs)
ct = Counter(pairs); A = Counter(a for a, _ in pairs); B = Counter(b for _, b in pairs)
if len(A) == len(B) == 1: nmi = 1.0
else:
    mi = sum(n / N * math.log(N * n / (A[a] * B[b])) for (a, b), n in ct.items())
    h = lambda C: -sum(v / N * math.log(v / N) for v in C.values())
    nmi = mi / ((h(A) + h(B)) / 2)
c2 = lambda x: x * (x - 1) / 2
sc = sum(c2(n) for n in ct.values()); sa = sum(c2(v) for v in A.values()); sb = sum(c2(v) for v in B.values())
exp = sa * sb / c2(N) if N > 1 else 0; mx = (sa + sb) / 2
ari = 1.0 if mx == exp else (sc - exp) / (mx - exp)
best = {}
for (a, b), n in ct.items(): best[b] = max(best.get(b, 0), n)
pur = sum(best.values()) / N
rep = json.load(open(out + '/report.json'))['results']
q = rep.get('quality') or rep.get('cluster', {}).get('quality')
if q is None: errs.append('report.json: no quality')
else:
    for k, want in (('nmi', nmi), ('ari', ari), ('purity', pur)):
        if abs(q[k] - want) > 1e-8: errs.append('%s %.9f, textbook %.9f' % (k, q[k], want))
    if q['labelled_documents'] != N: errs.append('labelled_documents %d, %d have a first label' % (q['labelled_documents'], N))
    if q['classes'] != len(A): errs.append('classes %d, expected %d' % (q['classes'], len(A)))
if len(sys.argv) > 5:  # the expected quality too
    for k, want in zip(('nmi', 'ari', 'purity'), map(float, sys.argv[5:8])):
        if q and abs(q[k] - want) > 1e-8: errs.append('%s %.9f, expected %.9f' % (k, q[k], want))
print('; '.join(errs))
sys.exit(1 if errs else 0)
EOF
check() { # check NAME OUTDIR DOCS CLUSTER_COLUMN COLUMNS [NMI ARI PURITY]
  local name=$1 why
  shift
  if why=$(python3 "$t/check.py" "$@" 2>&1); then ok "$name"; else bad "$name: $why"; fi
}

flock=(--backend cpu --iterations 60 --neighbours 3 --seed 3 --quiet)
if "$dm" vectorize --backend cpu --corpus "$t/cj" -o "$t/j.dmv" --vocab "$t/j.vocab" --quiet &&
   "$dm" vectorize --backend cpu --corpus "$t/ct" -o "$t/t.dmv" --quiet; then
  ok "vectorize the corpora"
else
  bad "vectorize the corpora"
fi
"$dm" flock "${flock[@]}" --vectors "$t/j.dmv" --vocab "$t/j.vocab" -o "$t/fj" > /dev/null 2>&1
check "flock: awkward ids and labels, quality recomputed" "$t/fj" 120 2 3
"$dm" flock "${flock[@]}" --vectors "$t/t.dmv" -o "$t/ft" > /dev/null 2>&1
check "flock: non-UTF-8 ids and labels, quality recomputed" "$t/ft" 120 2 3
"$dm" streamclust 2 5 64 0 120 40 --backend cpu --vectors "$t/j.dmv" -o "$t/sj" --quiet > /dev/null 2>&1
check "streamclust --vectors: quality recomputed" "$t/sj" 120 2 5
"$dm" pipeline --backend cpu --corpus "$t/ct" --method streamclust --k 2,4 --dim 32 -o "$t/pt" --quiet > /dev/null 2>&1
check "pipeline --method streamclust: quality recomputed" "$t/pt" 120 2 3

# every document noise: one cluster (-1) against the classes: NMI 0, ARI 0, purity the largest
# class over the labelled documents
"$dm" flock "${flock[@]}" --vectors "$t/t.dmv" --small noise --min-cluster 100000 --merge 0 --refine 0 -o "$t/noise" \
  > /dev/null 2>&1
# classes of the TSV corpus: sport, sport\xe9, money, ... : 32 + 8 per topic, the largest 32 of 120
check "all noise: NMI 0, ARI 0, purity the largest class" "$t/noise" 120 2 3 0 0 "$(python3 -c 'print(32/120)')"
if [ "$(awk -F'\t' '$1 == -1 {print $2}' "$t/noise/clusters.tsv" 2> /dev/null)" = 120 ]; then
  ok "all noise: clusters.tsv's -1 row holds every document"
else
  bad "all noise: clusters.tsv: $(cat "$t/noise/clusters.tsv" 2>&1)"
fi

# --- a vocabulary with CR LF line ends --------------------------------------------------------------
# the same names with CR LF, a blank and a comment line: the same clusters.tsv, no CR in it
awk 'NR == 3 {printf "\r\n# a comment\r\n"} {printf "%s\r\n", $0}' "$t/j.vocab" > "$t/crlf.vocab"
"$dm" flock "${flock[@]}" --vectors "$t/j.dmv" --vocab "$t/crlf.vocab" -o "$t/fcr" > /dev/null 2> "$t/fcr.err"
if [ -s "$t/fcr/clusters.tsv" ] && cmp -s "$t/fj/clusters.tsv" "$t/fcr/clusters.tsv"; then
  ok "CR LF vocabulary with a blank line: the names of the LF one"
else
  bad "CR LF vocabulary with a blank line: $(cat "$t/fcr.err") $(cat -A "$t/fcr/clusters.tsv" 2>&1 | head -3)"
fi
# a bad fourth line: the message names line 4 (not 7)
printf 'id\tterm\tdf\r\n0\tbank\t5\r\n1\tcoach\t3\r\nnot a term line\r\n2\tx\t1\r\n' > "$t/bad.vocab"
expect "CR LF vocabulary: an error names the file's line" 1 'bad\.vocab:4: expected id<TAB>term<TAB>df' -- \
  "$dm" flock "${flock[@]}" --vectors "$t/j.dmv" --vocab "$t/bad.vocab" -o "$t/fbad"
printf 'id\tterm\tdf\r\n\r\n0\tbank\t5\r\n999999\tx\t1\r\n' > "$t/big.vocab"
expect "CR LF vocabulary: an id out of range names its line" 1 'big\.vocab:4: term id 999999' -- \
  "$dm" flock "${flock[@]}" --vectors "$t/j.dmv" --vocab "$t/big.vocab" -o "$t/fbig"

finish
