#!/usr/bin/env bash
# The benchmark programs from a user's side, tiny, on the CPU backend (bench/, bench_util.h):
#  - numbers are checked (no atoi-style 0, no negative count read as a huge one), unknown options
#    and stray words refused, each with one line naming the problem and exit 2; --help exits 0;
#  - bench_preprocess and bench_tfidf read their default corpus from $DOCMINE_DATASETS (as the
#    tests do), a missing corpus is one line saying where it looked and what to do, exit 1;
#  - the output starts with the command line, the GPU and the date, and the JSON has them;
#  - an output that cannot be written (--json, --vectors-out) is exit 1, not 0; --baseline is
#    checked before the run; the work folder may hold spaces and quotes;
#  - without a GPU, --backend cuda exits 77 (skipped); one rank only where the program says so;
#  - the scikit-learn scripts say why they cannot run (exit 1), bad arguments exit 2.
# usage: test_bench_cli.sh BUILD_DIR SOURCE_DIR [MPIEXEC] [CUDA_BUILD (0/1)]
set -u
build=$1; src=$2; mpiexec=${3:-mpiexec}; cuda=${4:-0}
[ "$cuda" = ON ] || [ "$cuda" = 1 ] && cuda=1 || cuda=0
flock=$build/bench/flock/bench_flock pp=$build/bench/preprocess/bench_preprocess
tf=$build/bench/tfidf/bench_tfidf sc=$build/bench/streamclust/bench_streamclust
cpu_probe=$build/bench/common/cpu_probe intranode=$build/bench/common/intranode_probe
t0=$(mktemp -d); trap 'rm -rf "$t0"' EXIT
t="$t0/a b'c" # a space and a quote in every path below
mkdir -p "$t"
cd "$t" || exit 1
export OMP_NUM_THREADS=1
pass=0; fail=0
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
ok() { pass=$((pass + 1)); }
# check NAME RC STDERR_REGEX -- command...: the exit code, and (regex given) stderr holds exactly
# one line (one rank's), matching it
check() {
    local name=$1 want=$2 re=$3
    shift 4
    local err rc lines
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    lines=$(printf '%s\n' "$err" | grep -c . || true)
    if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, expected $want; stderr: $err"; return; fi
    if [ -n "$re" ] && { ! printf '%s' "$err" | grep -Eq -- "$re" || [ "$lines" -ne 1 ]; }; then
        bad "$name: stderr does not match /$re/ in one line: $err"; return
    fi
    ok
}

# ---- a tiny Reuters-21578 folder: two .sgm.gz files of single-topic articles
data="$t/data sets"
mkdir -p "$data/reuters21578"
for f in 0 1; do
    {
        echo '<!DOCTYPE lewis SYSTEM "lewis.dtd">'
        for i in $(seq 1 60); do
            topic=$([ $((i % 2)) = 0 ] && echo grain || echo crude)
            echo "<REUTERS TOPICS=\"YES\" NEWID=\"$f$i\"><TOPICS><D>$topic</D></TOPICS><TEXT><TITLE>$topic report $i</TITLE>"
            echo "<BODY>The $topic market moved $i points as traders weighed $topic supplies and $topic prices.</BODY></TEXT></REUTERS>"
        done
    } | gzip > "$data/reuters21578/reut2-00$f.sgm.gz"
done

# ---- bench_flock
check "flock --docs abc" 2 "^bench_flock: --docs: 'abc' is not a whole number" -- "$flock" --docs abc
check "flock --docs -5" 2 "^bench_flock: --docs: '-5'" -- "$flock" --docs -5
check "flock --iterations 0" 2 "^bench_flock: --iterations: '0'" -- "$flock" --iterations 0
check "flock --iterations overflow" 2 "--iterations: '99999999999'" -- "$flock" --iterations 99999999999
check "flock --threshold x" 2 "--threshold: 'x' is not a number" -- "$flock" --threshold x
check "flock --seed 1.5" 2 "--seed: '1.5'" -- "$flock" --seed 1.5
check "flock --weights 3 values" 2 "--weights: '1,2,3' is not 4 numbers" -- "$flock" --weights 1,2,3
check "flock --study-mins 5,x" 2 "--study-mins: 'x'" -- "$flock" --cluster-study --study-mins 5,x
check "flock --backend gpu" 2 "--backend: 'gpu'" -- "$flock" --backend gpu
check "flock stray word" 2 "unexpected argument 'extra'" -- "$flock" extra
check "flock --docs and --docs-per-rank" 2 "give one of them" -- "$flock" --docs 10 --docs-per-rank 5
check "flock --min-df without --corpus" 2 "need --corpus" -- "$flock" --min-df 2
check "flock unknown option" 2 "" -- "$flock" --bogus
check "flock --help" 0 "" -- "$flock" --help
"$flock" --help | grep -q -- '--migrate-every K' || bad "flock --help lists --migrate-every"
check "flock usage error on 2 ranks: one line" 2 "^bench_flock: --docs: 'x'" -- "$mpiexec" -n 2 "$flock" --docs x
if "$flock" --backend cpu --corpus "$data/reuters21578" --top-labels 2 --iterations 3 --shrink 0 --vocab-out "$t/v.tsv" > "$t/fc.out" 2>&1; then
    grep -q '^flock benchmark: 120 documents' "$t/fc.out" && [ -s "$t/v.tsv" ] && ok || bad "flock --corpus: $(grep -E 'documents|subset' "$t/fc.out")"
else
    bad "flock --corpus (a space and a quote in the path): $(tail -3 "$t/fc.out")"
fi
check "flock --corpus missing" 1 "^bench_flock: --corpus .*/nothing: No such file" -- "$flock" --corpus "$t/nothing"
check "flock --baseline missing (before the run)" 1 "^bench_flock: --baseline .*/nothing.json" -- "$flock" --backend cpu --docs 200 --iterations 2 --baseline "$t/nothing.json"
check "flock --vectors-out unwritable" 1 "--vectors-out" -- "$flock" --backend cpu --docs 200 --iterations 2 --vectors-out "$t/no/such/v.dmv"
check "flock --json unwritable" 1 "no/such" -- "$flock" --backend cpu --docs 200 --iterations 2 --json "$t/no/such/f.json"
if "$flock" --backend cpu --docs 300 --iterations 3 --json "$t/flock 1.json" > "$t/flock.out" 2>&1; then
    grep -q "^command: .*bench_flock --backend cpu --docs 300 --iterations 3 --json '.*/flock 1.json'$" "$t/flock.out" &&
        grep -Eq '^gpu: .*, date: 20[0-9-]+T[0-9:]+Z$' "$t/flock.out" && ok || bad "flock header lines: $(head -3 "$t/flock.out")"
    python3 - "$t/flock 1.json" <<'EOF' && ok || bad "flock JSON: command, date, ms_per_iteration"
import json, sys
d = json.load(open(sys.argv[1]))
assert "bench_flock" in d["command"] and d["date"].endswith("Z") and d["ms_per_iteration"] > 0
EOF
    check "flock --baseline of a one-rank run" 0 "" -- "$mpiexec" -n 2 "$flock" --backend cpu --docs-per-rank 150 --iterations 3 --baseline "$t/flock 1.json"
else
    bad "flock tiny run: $(tail -3 "$t/flock.out")"
fi

# ---- bench_preprocess: the default corpus from $DOCMINE_DATASETS (the old default, beside the
# source tree, is made to point nowhere)
export DOCMINE_SOURCE_DIR="$t/nowhere"
ppargs=(--backend cpu --repeats 1 --kernel-repeats 1 --no-sklearn)
check "pp --repeats 0" 2 "^bench_preprocess: --repeats: '0'" -- "$pp" --repeats 0
check "pp --workers x" 2 "--workers: 'x'" -- "$pp" --workers x
check "pp --min-bytes -1" 2 "--min-bytes: '-1'" -- "$pp" --min-bytes -1
check "pp --backend gpu" 2 "--backend: 'gpu'" -- "$pp" --backend gpu
check "pp stray word" 2 "unexpected argument" -- "$pp" corpus
check "pp --help" 0 "" -- "$pp" --help
"$pp" --help | grep -q 'DOCMINE_DATASETS' || bad "pp --help names DOCMINE_DATASETS"
check "pp corpus missing" 1 "^bench_preprocess: corpus .*/nothing/reuters21578 not found.*DOCMINE_DATASETS" -- env DOCMINE_DATASETS="$t/nothing" "$pp" "${ppargs[@]}"
check "pp --corpus missing" 1 "^bench_preprocess: --corpus .*/nothing" -- "$pp" "${ppargs[@]}" --corpus "$t/nothing"
if DOCMINE_DATASETS="$data" "$pp" "${ppargs[@]}" --json "$t/pp.json" > "$t/pp.out" 2>&1; then
    python3 - "$t/pp.json" "$data/reuters21578" <<'EOF' && ok || bad "pp JSON: corpus from DOCMINE_DATASETS, command, date"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["corpus"] == sys.argv[2], d["corpus"]
assert "bench_preprocess" in d["command"] and d["date"].endswith("Z") and d["runs"]
EOF
    grep -q '^command: ' "$t/pp.out" && grep -q '^gpu: none, date: ' "$t/pp.out" && ok || bad "pp header lines"
else
    bad "pp with DOCMINE_DATASETS: $(tail -3 "$t/pp.out")"
fi
# --min-bytes: the copies under a --work folder with a space and a quote (no shell in between)
if DOCMINE_DATASETS="$data" "$pp" "${ppargs[@]}" --min-bytes 40000 --work "$t/pp work" --json "$t/pp2.json" > "$t/pp2.out" 2>&1; then
    grep -q "^corpus: [0-9]* copies of .* in $t/pp work/corpus" "$t/pp2.out" && ok || bad "pp --min-bytes copies: $(grep corpus: "$t/pp2.out")"
    ls "$t/pp work/base/"*.part.* > /dev/null 2>&1 && bad "pp left a .part file" || ok
else
    bad "pp --min-bytes with a quote in --work: $(tail -3 "$t/pp2.out")"
fi
check "pp --json unwritable" 1 "--json: .*no/such" -- env DOCMINE_DATASETS="$data" "$pp" "${ppargs[@]}" --json "$t/no/such/x.json"
check "pp 2 ranks" 2 "one process" -- "$mpiexec" -n 2 "$pp" "${ppargs[@]}"
# scikit-learn: said why it did not run, or run (then a rate)
DOCMINE_SOURCE_DIR="$src" DOCMINE_DATASETS="$data" "$pp" --backend cpu --repeats 1 --kernel-repeats 1 --json "$t/pp3.json" > "$t/pp3.out" 2>&1
grep -Eq '^(scikit-learn TfidfVectorizer analyzer: [0-9.]+ GB/s|scikit-learn comparison skipped: .+)' "$t/pp3.out" && ok ||
    bad "pp scikit-learn line: $(grep -i scikit "$t/pp3.out")"
if [ "$cuda" = 0 ]; then
    check "pp --backend cuda without a GPU" 77 "no GPU" -- env DOCMINE_DATASETS="$data" "$pp" --backend cuda
fi

# ---- bench_tfidf (end to end only: the kernel tables need a GPU)
tfargs=(--backend cpu --e2e-only --no-sklearn --min-bytes 1 --e2e-repeats 1 --work "$t/tf work")
check "tf --repeats x" 2 "^bench_tfidf: --repeats: 'x'" -- "$tf" --repeats x
check "tf --tokens 1e6" 2 "--tokens: '1e6'" -- "$tf" --tokens 1e6
check "tf --backend gpu" 2 "--backend: 'gpu'" -- "$tf" --backend gpu
check "tf --skip-e2e --e2e-only" 2 "nothing left to run" -- "$tf" --skip-e2e --e2e-only
check "tf --help" 0 "" -- "$tf" --help
"$tf" --help | grep -q 'bench/README' && bad "tf --help names bench/README.md, which does not exist" || ok
check "tf corpus missing" 1 "^bench_tfidf: corpus .*/nothing/reuters21578 not found" -- env DOCMINE_DATASETS="$t/nothing" "$tf" "${tfargs[@]}"
if DOCMINE_DATASETS="$data" "$tf" "${tfargs[@]}" --json "$t/tf.json" > "$t/tf.out" 2>&1; then
    python3 - "$t/tf.json" <<'EOF' && ok || bad "tf JSON: a vectorize run, command, date"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["vectorize"] and d["vectorize"][0]["docs"] == 120, d["vectorize"]
assert "bench_tfidf" in d["command"] and d["date"].endswith("Z")
EOF
    grep -q '^command: ' "$t/tf.out" && ok || bad "tf header lines"
else
    bad "tf with DOCMINE_DATASETS and a quote in --work: $(tail -3 "$t/tf.out")"
fi
check "tf 2 ranks" 2 "one process" -- env DOCMINE_DATASETS="$data" "$mpiexec" -n 2 "$tf" "${tfargs[@]}"
if [ "$cuda" = 0 ]; then
    check "tf --backend cuda without a GPU" 77 "no GPU" -- env DOCMINE_DATASETS="$data" "$tf" --backend cuda --e2e-only
    check "tf --skip-e2e without a GPU" 77 "no GPU" -- "$tf" --skip-e2e
fi
unset DOCMINE_SOURCE_DIR

# ---- bench_streamclust
check "sc --help" 0 "" -- "$sc" --help
"$sc" --help | grep -q '^usage: bench_streamclust' || bad "sc --help on stdout"
check "sc --backend gpu" 2 "^bench_streamclust: --backend: 'gpu'" -- "$sc" --backend gpu
check "sc --json without a value" 2 "--json needs a value" -- "$sc" --json
check "sc unknown argument" 2 "unknown argument '--fast'" -- "$sc" --fast
if [ "$cuda" = 0 ]; then check "sc --backend cuda without a GPU" 77 "no GPU" -- "$sc" --backend cuda; fi
if "$sc" --backend cpu --quick --no-large --no-sweep --json "$t/sc.json" > "$t/sc.out" 2>&1; then
    python3 - "$t/sc.json" <<'EOF' && ok || bad "sc JSON: a run, command, date"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["runs"][0]["ok"] and "bench_streamclust" in d["command"] and d["date"].endswith("Z")
EOF
else
    bad "sc --quick: $(tail -3 "$t/sc.out")"
fi
check "sc --json unwritable" 1 "--json: .*no/such" -- "$sc" --backend cpu --quick --no-large --no-sweep --json "$t/no/such/sc.json"

# ---- the probes
check "cpu_probe abc" 2 "^cpu_probe: N: 'abc'" -- "$cpu_probe" abc
check "cpu_probe rounds 0" 2 "R \(rounds\): '0'" -- "$cpu_probe" 10 0
check "cpu_probe --help" 0 "" -- "$cpu_probe" --help
check "intranode_probe S not a multiple of 8" 2 "not a multiple of 8" -- "$intranode" 4097

# ---- the scikit-learn scripts
for s in preprocess/sklearn_tokenize.py tfidf/sklearn_tfidf.py; do
    check "$s without arguments" 2 "^usage: " -- python3 "$src/bench/$s"
    check "$s missing folder" 1 "(not installed|not a directory)" -- python3 "$src/bench/$s" "$t/nothing"
    if python3 -c 'import sklearn' 2> /dev/null; then # the .sgm.gz files are read (raw bytes: decompressed)
        out=$(python3 "$src/bench/$s" "$data/reuters21578" 2> /dev/null)
        python3 -c 'import sys; assert float(sys.argv[1]) > 0' "${out%% *}" 2> /dev/null && ok || bad "$s on .sgm.gz: '$out'"
    fi
done
check "sklearn_tfidf.py MAX_BYTES -3" 2 "MAX_BYTES '-3'" -- python3 "$src/bench/tfidf/sklearn_tfidf.py" "$data" -3

echo "bench_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
