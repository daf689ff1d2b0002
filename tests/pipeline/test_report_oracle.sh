#!/usr/bin/env bash
# An end-to-end oracle of what docmine's result files claim: report_oracle.py (pure Python, no
# docmine code) reads the corpus and each output folder and recomputes the documents (every input
# document once, in corpus order, with its labels), clusters.tsv's sizes and top terms, the noise,
# NMI / ARI / purity from their definitions (first label, byte for byte; unlabelled left out; noise
# one cluster), and report.json's counts, timers, throughput and outputs list. Runs, CPU backend:
#  - `docmine pipeline --method flock|streamclust`, `docmine flock --vectors|--synth`, `docmine
#    streamclust --vectors`, on 1, 2 and 3 ranks;
#  - corpora: a hand-made JSONL + TSV one (multi-label arrays and strings, no label, null and ""
#    labels, an empty first label, a number label, labels differing in a tab or in case, non-UTF-8
#    labels, ids with tabs, line breaks, quotes and commas, default ids, empty and token-less texts,
#    bad records), `docmine synth`'s corpus (also as the labels of `--synthetic`), the Reuters-21578
#    subset (reut2-000, reut2-001; skipped, and said so, when absent);
#  - adversarial: every document unlabelled, one class only, one document (1 and 3 ranks), every
#    document noise, a corpus whose every text is empty (exit 1, one line, no results);
#  - the oracle itself: its metrics against hand-computed values, and altered outputs it must
#    reject.
# usage: test_report_oracle.sh <docmine> <mpiexec>
set -uo pipefail
dm=$1
mpiexec=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../testutil/cli_lib.sh"
command -v python3 > /dev/null || { echo "python3 not found: skipped"; exit 0; }
t=$(mktemp -d "${TMPDIR:-/tmp}/docmine-oracle-XXXXXX")
trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=1
oracle_py=$here/report_oracle.py

# run NAME RANKS COMMAND ARGS...: docmine COMMAND on RANKS ranks, output folder $t/NAME
run() {
    local name=$1 n=$2 cmd=$3
    shift 3
    local rc
    if [ "$n" -eq 1 ]; then "$dm" "$cmd" --backend cpu --quiet "$@" -o "$t/$name" > "$t/$name.out" 2> "$t/$name.err"
    else "$mpiexec" -n "$n" "$dm" "$cmd" --backend cpu --quiet "$@" -o "$t/$name" > "$t/$name.out" 2> "$t/$name.err"; fi
    rc=$?
    [ $rc -eq 0 ] || bad "$name: docmine $cmd exited $rc: $(head -c 600 "$t/$name.err")"
    return $rc
}
# oracle NAME ORACLE-ARGS...: the oracle on $t/NAME passes
oracle() {
    local name=$1 out
    shift
    if out=$(python3 "$oracle_py" "$t/$name" "$@" 2>&1); then
        ok "$name: $(printf '%s\n' "$out" | tail -n 1)"
    else
        bad "$name: $out"
    fi
}
# rejects NAME WHAT ORACLE-ARGS...: the oracle fails on $t/NAME, naming WHAT (a regex)
rejects() {
    local name=$1 what=$2 out
    shift 2
    if out=$(python3 "$oracle_py" "$t/$name" "$@" 2>&1); then bad "oracle accepted $name: $out"
    elif printf '%s' "$out" | grep -Eq -- "$what"; then ok "oracle rejects $name"
    else bad "oracle rejected $name without saying /$what/: $out"; fi
}

# --- corpora -----------------------------------------------------------------------------------
python3 - "$t" <<'EOF'
import json, os, random, sys
t = sys.argv[1]
random.seed(5)
topics = {'sport': 'football goal match team player score league coach referee stadium'.split(),
          'money': 'bank stock market price trade invest profit share dollar economy'.split(),
          'space': 'rocket orbit planet star moon launch nasa galaxy astronaut telescope'.split()}
text = lambda words, n=25: ' '.join(random.choice(words) for _ in range(n))
os.makedirs(t + '/mix')
with open(t + '/mix/a.jsonl', 'w') as f:
    k = 0
    for name, words in topics.items():
        for i in range(30):
            rec = {'id': 'd%d' % k, 'text': text(words)}
            m = i % 10
            if m == 1: rec['label'] = [name, 'extra']                   # multi-label array: the first counts
            elif m == 2: rec['label'] = name + ',second'                 # multi-label string
            elif m == 3: rec['label'] = None if i < 10 else ',' + name if i < 20 else ''  # null; empty first label; ""
            elif m == 4: pass                                            # no label
            elif m == 5: rec['labels'] = [None, '', name]                # null and "" elements are no label
            elif m == 6: rec['label'] = 'x\ty' if name == 'sport' else 'x y'  # two classes, not one
            elif m == 7: rec['id'] = 'tab\tid\n%d"q,' % k; rec['label'] = name.upper() if i > 10 else name
            elif m == 8: del rec['id']; rec['label'] = name              # default id FILE:LINE
            elif m == 0 and i == 20: rec['label'] = 7                    # a number label
            else: rec['label'] = name
            if i == 9: rec['text'] = ''                                  # empty text: a document all the same
            if i == 19: rec['text'] = '... !!! ,,, ?'                    # no token either
            f.write(json.dumps(rec) + '\n')
            k += 1
    f.write('{"id": "broken", "text": \n')                              # skipped: bad JSON
    f.write('{"id": "commalab", "label": ["a,b"], "text": "moon"}\n')   # skipped: a comma in an element
    f.write('\n')
with open(t + '/mix/b.tsv', 'wb') as f:
    for name, words in topics.items():
        for i in range(10):
            lab = name.encode() + (b'\xe9' if i % 3 == 0 else b'')       # non-UTF-8: another class
            f.write(b'\xfft%d\t%s\t%s\n' % (i, lab, text(words).encode()))
    f.write(b'no-tabs-here\n')                                           # skipped: bad TSV
w = 'alpha beta gamma delta epsilon zeta eta theta iota kappa'.split()
v = 'red green blue cyan magenta yellow black white orange purple'.split()
with open(t + '/unlabelled.jsonl', 'w') as f:
    for i in range(60):
        f.write(json.dumps({'id': 'u%d' % i, 'text': text(w if i % 2 else v, 20)}) + '\n')
with open(t + '/oneclass.jsonl', 'w') as f:
    for i in range(60):
        f.write(json.dumps({'id': 'o%d' % i, 'label': 'only', 'text': text(w if i % 2 else v, 20)}) + '\n')
with open(t + '/single.jsonl', 'w') as f:
    f.write(json.dumps({'id': 's', 'label': 'a,b', 'text': 'lonely document about rockets'}) + '\n')
with open(t + '/allempty.jsonl', 'w') as f:
    for i in range(12):
        f.write(json.dumps({'id': 'e%d' % i, 'label': 'l%d' % (i % 2), 'text': '' if i % 3 else '!!'}) + '\n')
EOF
plain=(--no-stem --no-stopwords)                          # the oracle recomputes the top terms
fl=(--iterations 40 --neighbours 5)
"$dm" vectorize --backend cpu --quiet --corpus "$t/mix" "${plain[@]}" -o "$t/mix.dmv" --vocab "$t/mix.vocab" 2> /dev/null &&
    "$dm" vectorize --backend cpu --quiet --corpus "$t/unlabelled.jsonl" -o "$t/unl.dmv" &&
    "$dm" vectorize --backend cpu --quiet --corpus "$t/single.jsonl" -o "$t/single.dmv" &&
    "$dm" synth -n 300 -k 4 --min-words 30 --max-words 80 --overlap 0.2 --seed 9 -o "$t/syn.tsv" --quiet &&
    "$dm" vectorize --backend cpu --quiet --corpus "$t/syn.tsv" -o "$t/syn.dmv" ||
    bad "making the corpora and vectors"

# --- the oracle itself ---------------------------------------------------------------------------
# hand-computed: ARI (2 - 1.2) / (4.5 - 1.2) = 8/33, purity (2 + 1 + 2) / 6, NMI I / ((ln 2 + ln 3) / 2)
# (I written out below, 0.5158 as scikit-learn gives); crossed labels: NMI 0, ARI -1/2; trivial: 1
if python3 - "$here" <<'EOF'
import math, sys
sys.path.insert(0, sys.argv[1])
from report_oracle import metrics
m = metrics([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2])
mi = 2 * (2 / 6) * math.log(6 * 2 / (3 * 2)) + 2 * (1 / 6) * math.log(6 * 1 / (3 * 2))
assert abs(m['ari'] - 8 / 33) < 1e-12 and abs(m['purity'] - 5 / 6) < 1e-12, m
assert abs(m['nmi'] - mi / ((math.log(2) + math.log(3)) / 2)) < 1e-12 and abs(m['nmi'] - 0.5158037429793889) < 1e-9, m
m = metrics(['a', 'a', 'b', 'b'], [0, 1, 0, 1])
assert m['nmi'] == 0 and abs(m['ari'] + 0.5) < 1e-12 and m['purity'] == 0.5, m
assert metrics(['a'] * 5, [3] * 5) == {'nmi': 1.0, 'ari': 1.0, 'purity': 1.0, 'labelled_documents': 5, 'classes': 1, 'clusters': 1}
m = metrics(['a'] * 4, [0, 1, 2, 3])                       # one class, all apart: NMI 0, ARI 0
assert m['nmi'] == 0 and m['ari'] == 0 and m['purity'] == 1, m
EOF
then ok "oracle: metrics against hand-computed values"; else bad "oracle: metrics against hand-computed values"; fi

# --- the hand-made corpus: both methods, every command, 1 and 2 ranks ---------------------------
mixo=(--corpus "$t/mix" --expect-empty 6 --plain-words)
run pf1 1 pipeline --corpus "$t/mix" "${plain[@]}" "${fl[@]}" && oracle pf1 --kind pipeline "${mixo[@]}" --iterations 40
run ps1 1 pipeline --corpus "$t/mix" "${plain[@]}" --method streamclust --k 3,5 --dim 32 --top-terms 4 &&
    oracle ps1 --kind pipeline --method streamclust "${mixo[@]}" --top-k 4
run ff1 1 flock --vectors "$t/mix.dmv" --vocab "$t/mix.vocab" "${fl[@]}" && oracle ff1 --kind flock --corpus "$t/mix" --plain-words
run sc1 1 streamclust 3 5 32 0 200 40 --vectors "$t/mix.dmv" && oracle sc1 --kind streamclust --corpus "$t/mix"
run pf2 2 pipeline --corpus "$t/mix" "${plain[@]}" "${fl[@]}" && oracle pf2 --kind pipeline "${mixo[@]}" --ranks 2
run ps2 2 pipeline --corpus "$t/mix" "${plain[@]}" --method streamclust --k 3,5 --dim 32 &&
    oracle ps2 --kind pipeline --method streamclust "${mixo[@]}" --ranks 2
run ff2 2 flock --vectors "$t/mix.dmv" --vocab "$t/mix.vocab" "${fl[@]}" && oracle ff2 --kind flock --corpus "$t/mix" --plain-words --ranks 2
run sc2 2 streamclust 3 5 32 100 30 40 --vectors "$t/mix.dmv" && oracle sc2 --kind streamclust --corpus "$t/mix" --streamclust-n 100 --ranks 2
# 3 ranks (oversubscribed: few runs)
run pf3 3 pipeline --corpus "$t/mix" "${plain[@]}" "${fl[@]}" && oracle pf3 --kind pipeline "${mixo[@]}" --ranks 3
for f in assignments.tsv clusters.tsv positions.csv; do
    check "flock's $f: the same on 1, 2 and 3 ranks" 'cmp -s "$t/pf1/$f" "$t/pf2/$f" && cmp -s "$t/pf1/$f" "$t/pf3/$f"'
    check "flock --vectors $f: the same on 1 and 2 ranks" 'cmp -s "$t/ff1/$f" "$t/ff2/$f"'
done

# --- synthetic corpora --------------------------------------------------------------------------
# `--synthetic` generates `docmine synth`'s documents: the oracle takes their ids and labels from it
# shellcheck disable=SC2054  # (30,80 is one argument)
sy=(--synthetic 300 --synth-topics 4 --synth-words 30,80 --synth-overlap 0.2 --seed 9)
run sy1 1 pipeline "${sy[@]}" --iterations 30 --neighbours 10 && oracle sy1 --kind pipeline --synthetic 300 --corpus "$t/syn.tsv"
run syc 1 pipeline --corpus "$t/syn.tsv" --seed 9 --iterations 30 --neighbours 10 && oracle syc --kind pipeline --corpus "$t/syn.tsv"
check "pipeline --synthetic: the results of the same corpus read from docmine synth's file" \
    'cmp -s "$t/sy1/assignments.tsv" "$t/syc/assignments.tsv" && cmp -s "$t/sy1/clusters.tsv" "$t/syc/clusters.tsv"'
run sys3 3 pipeline --synthetic default --docs-per-rank 40 --synth-topics 3 --synth-words 20,40 --method streamclust --k 3,3 --dim 32 &&
    oracle sys3 --kind pipeline --method streamclust --synthetic 120 --ranks 3
run fsy1 1 flock --synth 200 --synth-topics 3 --iterations 20 && oracle fsy1 --kind flock --synthetic 200
run fsy2 2 flock --synth 200 --synth-topics 3 --iterations 20 && oracle fsy2 --kind flock --synthetic 200 --ranks 2
run ssy1 1 streamclust 2 6 64 0 300 60 --vectors "$t/syn.dmv" && oracle ssy1 --kind streamclust --corpus "$t/syn.tsv"

# --- Reuters-21578 subset -----------------------------------------------------------------------
data=${DOCMINE_DATASETS:-${DOCMINE_SOURCE_DIR:-$here/../..}/../shared/datasets}/reuters21578
if [ -f "$data/reut2-000.sgm.gz" ] && [ -f "$data/reut2-001.sgm.gz" ]; then
    mkdir -p "$t/reuters"
    ln -s "$(cd "$data" && pwd)/reut2-000.sgm.gz" "$(cd "$data" && pwd)/reut2-001.sgm.gz" "$t/reuters/"
    reu=(--corpus "$t/reuters" --format reuters)
    run rf1 1 pipeline "${reu[@]}" --iterations 15 && oracle rf1 --kind pipeline --corpus "$t/reuters" --iterations 15
    run rf2 2 pipeline "${reu[@]}" --iterations 15 && oracle rf2 --kind pipeline --corpus "$t/reuters" --ranks 2
    run rs2 2 pipeline "${reu[@]}" --method streamclust --k 5,10 --dim 64 &&
        oracle rs2 --kind pipeline --method streamclust --corpus "$t/reuters" --ranks 2
else
    echo "skipped: Reuters subset ($data/reut2-00[01].sgm.gz not found)"
fi

# --- adversarial ----------------------------------------------------------------------------------
# every document unlabelled: no quality, no flock-labels.png, the outputs list without it
run un1 1 pipeline --corpus "$t/unlabelled.jsonl" --iterations 20 --neighbours 5 && oracle un1 --kind pipeline --corpus "$t/unlabelled.jsonl"
run uns 1 pipeline --corpus "$t/unlabelled.jsonl" --method streamclust --k 2,3 --dim 16 &&
    oracle uns --kind pipeline --method streamclust --corpus "$t/unlabelled.jsonl"
run unf 1 flock --vectors "$t/unl.dmv" --iterations 20 --neighbours 5 && oracle unf --kind flock --corpus "$t/unlabelled.jsonl"
run unc 1 streamclust 2 3 16 0 60 10 --vectors "$t/unl.dmv" && oracle unc --kind streamclust --corpus "$t/unlabelled.jsonl"
# one class only
run oc1 1 pipeline --corpus "$t/oneclass.jsonl" --iterations 20 --neighbours 5 && oracle oc1 --kind pipeline --corpus "$t/oneclass.jsonl"
run ocs 1 pipeline --corpus "$t/oneclass.jsonl" --method streamclust --k 2,3 --dim 16 &&
    oracle ocs --kind pipeline --method streamclust --corpus "$t/oneclass.jsonl"
# one document ("a,b": class a): both methods; 3 ranks, two of them without a document
one=(--neighbours 0.2 --shrink 0 --iterations 5)
run one1 1 pipeline --corpus "$t/single.jsonl" "${one[@]}" && oracle one1 --kind pipeline --corpus "$t/single.jsonl"
run one3 3 pipeline --corpus "$t/single.jsonl" "${one[@]}" && oracle one3 --kind pipeline --corpus "$t/single.jsonl" --ranks 3
run ones3 3 pipeline --corpus "$t/single.jsonl" --method streamclust --k 1,1 --dim 8 &&
    oracle ones3 --kind pipeline --method streamclust --corpus "$t/single.jsonl" --ranks 3
run onef 1 flock --vectors "$t/single.dmv" "${one[@]}" && oracle onef --kind flock --corpus "$t/single.jsonl"
run onec 1 streamclust 1 1 8 0 10 10 --vectors "$t/single.dmv" && oracle onec --kind streamclust --corpus "$t/single.jsonl"
# every document noise: one cluster -1 of them all
noise=(--small noise --min-cluster 100000 --merge 0 --refine 0)
run nz1 1 pipeline --corpus "$t/mix" "${plain[@]}" "${fl[@]}" "${noise[@]}" && oracle nz1 --kind pipeline "${mixo[@]}"
run nzf 2 flock --vectors "$t/mix.dmv" "${fl[@]}" "${noise[@]}" && oracle nzf --kind flock --corpus "$t/mix" --ranks 2
check "every document noise: clusters.tsv is the -1 row of them all" \
    '[ "$(tail -n +2 "$t/nz1/clusters.tsv" | tr "\t" " ")" = "-1 120  " ]' "$(cat "$t/nz1/clusters.tsv")"
# every text empty: no terms at all, a runtime error in one line and no results
expect "every text empty: exit 1, one line" 1 'no terms in any of the 12 documents' -- \
    "$dm" pipeline --backend cpu --quiet --corpus "$t/allempty.jsonl" -o "$t/allempty"
check "every text empty: no result files" '[ ! -e "$t/allempty/assignments.tsv" ] && [ ! -e "$t/allempty/report.json" ]'

# --- outputs altered: the oracle rejects them -------------------------------------------------------
alter() { # alter NAME FROM COMMAND: a copy of $t/FROM as $t/NAME, changed by COMMAND run in it
    rm -rf "${t:?}/$1" && cp -r "$t/$2" "$t/$1" && (cd "$t/$1" && eval "$3")
}
edit_report() { python3 -c 'import json, sys; r = json.load(open("report.json")); exec(sys.argv[1]); json.dump(r, open("report.json", "w"))' "$1"; }
alter m_row pf1 "sed -i '5d' assignments.tsv"
rejects m_row 'assignments.tsv: 119 documents' --kind pipeline "${mixo[@]}"
alter m_swap pf1 "sed -i '3{h;d};4{G}' assignments.tsv"
rejects m_swap 'documents differ from the input' --kind pipeline "${mixo[@]}"
alter m_size pf1 "awk -F'\t' -v OFS='\t' 'NR == 2 {\$2 = \$2 + 1} {print}' clusters.tsv > x && mv x clusters.tsv"
rejects m_size 'clusters.tsv: cluster 0 of size' --kind pipeline "${mixo[@]}"
alter m_nmi ps1 "edit_report 'r[\"results\"][\"quality\"][\"nmi\"] += 1e-6; r[\"results\"][\"cluster\"][\"quality\"][\"nmi\"] += 1e-6'"
rejects m_nmi 'quality.nmi' --kind pipeline --method streamclust "${mixo[@]}" --top-k 4
alter m_dps pf1 "edit_report 'r[\"results\"][\"throughput\"][\"documents_per_second\"] *= 1.01'"
rejects m_dps 'documents_per_second' --kind pipeline "${mixo[@]}"
alter m_timer pf1 "edit_report 'del r[\"timers_s\"][\"pipeline.tfidf\"]'"
rejects m_timer 'no timer pipeline.tfidf' --kind pipeline "${mixo[@]}"
alter m_noise ff1 "edit_report 'r[\"results\"][\"noise\"] += 1'"
rejects m_noise 'results.noise' --kind flock --corpus "$t/mix" --plain-words
alter m_cost sc1 "edit_report 'r[\"results\"][\"total_cost\"] *= 1.01'"
rejects m_cost 'total_cost' --kind streamclust --corpus "$t/mix"
alter m_outputs un1 "edit_report 'r[\"results\"][\"outputs\"].insert(4, \"flock-labels.png\")'"
rejects m_outputs 'results.outputs' --kind pipeline --corpus "$t/unlabelled.jsonl"

finish
