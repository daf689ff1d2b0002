#!/usr/bin/env bash
# A failure on one rank, not all (CPU backend, 2-3 ranks): every rank learns it, the job exits
# non-zero with one message naming the file, and nothing hangs (every run is under timeout, so a
# hang shows as exit 124). The input of only one rank is bad: the last rank's file of a corpus
# (a malformed JSON line or a corrupt .gz with --strict), STREAM.rank1 of a token stream (missing,
# truncated), a FIFO where rank 1 writes its temporary token stream; or only rank 0's write fails:
# --report FILE, or an output of DIR, that is a directory; a missing or corrupt --resume
# checkpoint; a corpus or vectors with fewer documents than ranks still run. Ranks given other
# arguments (mpiexec's ':' form) or seeing other files under one path (-wdir per rank: node-local
# disks) fail on every rank with one line naming the rank and the file; an OUTDIR so long that
# OUTDIR/name no longer fits is refused before the run, naming the path.
# usage: test_mpi_failures.sh <docmine> <mpiexec>
set -u
dm=$1
mpiexec=${2:-mpiexec}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/docmine-mpifail-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../testutil/cli_lib.sh"
export OMP_NUM_THREADS=1
# dmn <ranks> <args...>: docmine on the CPU backend under mpiexec, stopped after 120 s (exit 124)
dmn() { local n=$1; shift; timeout 120 "$mpiexec" -n "$n" "$dm" --backend cpu "$@"; }
cd "$tmp" || exit 1
mkdir good rdir
for i in 0 1 2 3; do mkcorpus "good/p$i.jsonl" 60 "p${i}_"; done

# ---- 1. only rank 0 fails to write the report -------------------------------------------------
# (preprocess did not agree on the report's status: rank 0 waited in the error's collective
# while the other ranks had finished)
exits "preprocess --report DIR, 2 ranks: rank 0's write fails, every rank exits 1" 1 \
    "docmine preprocess: rdir: rename from temporary failed: Is a directory" -- \
    dmn 2 preprocess --corpus good -o s.tok --report rdir
for c in "vectorize -o r.dmv" "icf-build -o r.icf" "pipeline -o rp --iterations 5"; do
    exits "${c%% *} --report DIR, 2 ranks" 1 "rdir: rename from temporary failed: Is a directory" -- \
        dmn 2 $c --corpus good --report rdir
done
exits "synth --report DIR, 2 ranks" 1 "rdir: rename from temporary failed" -- dmn 2 synth -n 50 -o syn --report rdir

# ---- 2. rank 1's temporary token stream is a FIFO ---------------------------------------------
# (the temporary name was a fixed FILE.tmp: rank 1 waited in fopen for a reader forever)
mkdir fifo && mkfifo fifo/s.tok.rank1.tmp
exits "preprocess -o: a FIFO named FILE.rank1.tmp does not stop rank 1" 0 "" -- \
    dmn 2 preprocess --quiet --corpus good -o fifo/s.tok
dmn 2 vectorize --quiet --tokens fifo/s.tok -o fifo.dmv >/dev/null 2>&1
if [ -s fifo/s.tok.rank0 ] && [ -s fifo/s.tok.rank1 ] && [ -s fifo.dmv ]; then ok "preprocess -o: both ranks' files written and read"
else bad "preprocess -o: both ranks' files written and read"; fi

# ---- 3. the last rank's share of the corpus is bad (--strict) --------------------------------
mkdir json gz
cp good/p0.jsonl good/p1.jsonl good/p2.jsonl json/ && cp good/p3.jsonl json/p3.jsonl && echo '{"id": broken' >>json/p3.jsonl
cp good/p0.jsonl good/p1.jsonl good/p2.jsonl gz/
head -c 2000 good/p3.jsonl | gzip >gz/p3.jsonl.gz && printf 'garbage' | dd of=gz/p3.jsonl.gz bs=1 seek=60 conv=notrunc 2>/dev/null
for n in 2 3; do
    expect "preprocess --strict, $n ranks: a bad line in the last rank's file" 1 \
        "docmine preprocess: json/p3.jsonl:61: .*\(--strict\) \[DM_ERR_FORMAT, rank $((n - 1))," -- \
        dmn "$n" preprocess --strict --corpus json -o j.tok
    expect "vectorize --strict, $n ranks: a corrupt .gz in the last rank's share" 1 \
        "docmine vectorize: gz/p3.jsonl.gz: corrupt gzip data.*rank $((n - 1))," -- \
        dmn "$n" vectorize --strict --corpus gz -o g.dmv
done
exits "pipeline --strict, 2 ranks: a bad line in rank 1's file" 1 "docmine pipeline: json/p3.jsonl:61: " -- \
    dmn 2 pipeline --strict --corpus json -o jp --iterations 5
exits "pipeline, 2 ranks: the bad line counted and skipped" 0 "1 skipped: 1 bad_json" -- \
    dmn 2 pipeline --corpus json -o jp --iterations 5

# ---- 4. vectorize --tokens: only STREAM.rank1 is bad ---------------------------------------
dmn 2 preprocess --quiet --corpus good -o t.tok 2>/dev/null
cp t.tok.rank1 keep.rank1 && rm t.tok.rank1
expect "vectorize --tokens, 2 ranks: STREAM.rank1 missing" 1 "docmine vectorize: t.tok.rank1: No such file" -- \
    dmn 2 vectorize --tokens t.tok -o t.dmv
head -c 1000 keep.rank1 >t.tok.rank1
expect "vectorize --tokens, 2 ranks: STREAM.rank1 truncated" 1 "docmine vectorize: t.tok.rank1: truncated" -- \
    dmn 2 vectorize --tokens t.tok -o t.dmv

# ---- 5. flock: rank 0's outputs fail, the checkpoint is missing or corrupt -------------------
dmn 1 vectorize --quiet --corpus good -o v.dmv 2>/dev/null
mkdir -p fo/positions.csv
expect "flock, 2 ranks: positions.csv is a directory" 1 "fo/positions.csv: rename from temporary failed" -- \
    dmn 2 flock --quiet --vectors v.dmv -o fo --iterations 5
rm -rf fo
expect "flock --resume, 2 ranks: no checkpoint" 1 "fo/flock.ckpt: No such file" -- \
    dmn 2 flock --vectors v.dmv -o fo --iterations 10 --checkpoint-every 5 --resume
dmn 2 flock --quiet --vectors v.dmv -o fo --iterations 10 --checkpoint-every 5 >/dev/null 2>&1
head -c 3000 fo/flock.ckpt >ck && mv ck fo/flock.ckpt
expect "flock --resume, 3 ranks: a truncated checkpoint" 1 "fo/flock.ckpt: checkpoint checksum mismatch" -- \
    dmn 3 flock --vectors v.dmv -o fo --iterations 10 --checkpoint-every 5 --resume

# ---- 6. fewer documents than ranks: ranks without any take part ------------------------------
mkdir few && head -n 2 good/p0.jsonl >few/a.jsonl
dmn 1 vectorize --quiet --corpus few -o few.dmv 2>/dev/null
exits "vectorize, 3 ranks on 2 documents" 0 "" -- dmn 3 vectorize --quiet --corpus few -o few3.dmv
if cmp -s few.dmv few3.dmv; then ok "vectorize, 3 ranks on 2 documents: the 1-rank file"; else bad "vectorize, 3 ranks on 2 documents: the 1-rank file"; fi
exits "streamclust --vectors, 3 ranks on 2 rows" 0 "" -- dmn 3 streamclust --quiet 1 2 8 0 100 20 --vectors few.dmv -o fsc

# ---- 7. rank 0 alone fails at the end: streamclust's report, stem's stdin ------------------------
mkdir -p rdir_sc
exits "streamclust --report DIR, 2 ranks" 1 "rdir_sc: rename from temporary failed" -- dmn 2 streamclust 2 4 16 100 100 50 -o sco --report rdir_sc
expect "stem, 2 ranks: rank 0's stdin fails" 1 "stdin: read error" -- timeout 120 "$mpiexec" -n 1 sh -c "exec \"$dm\" --backend cpu stem < /" : -n 1 "$dm" --backend cpu stem
exits "stem, 2 ranks" 0 "" -- sh -c "printf 'running\n' | timeout 120 \"$mpiexec\" -n 2 \"$dm\" --backend cpu stem"

# ---- 8. ranks given other arguments, or seeing other files under the same path ----------------
# (a usage error of rank 1 alone left rank 0 in a collective: exit 124; other valid options, a
# corpus, stop-word list or ICF table of other contents on rank 1 ran with exit 0 on mixed data)
# dm2 "<rank 0's args>" "<rank 1's args>": 2 ranks with the arguments given (word-split)
dm2() { timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu $1 : -n 1 "$dm" --backend cpu $2; }
expect "pipeline: a usage error of rank 1 alone" 2 "rank 1 was given other arguments than rank 0: argument 4 is '--min-df'" -- \
    dm2 "pipeline --corpus good -o po" "pipeline --corpus good --min-df bogus -o po"
expect "vectorize: another --min-df on rank 1" 2 "argument 5 is '3' on rank 1, '2' on rank 0" -- \
    dm2 "vectorize --corpus good --min-df 2 -o m.dmv" "vectorize --corpus good --min-df 3 -o m.dmv"
expect "synth: another --seed on rank 1" 2 "rank 1 was given --seed 8, rank 0 --seed 7" -- \
    dm2 "synth -n 50 -k 2 --seed 7 -o sy" "synth -n 50 -k 2 --seed 8 -o sy"
expect "icf-build: another command on rank 1" 2 "argument 1 is 'icf-build' on rank 1, 'preprocess' on rank 0" -- \
    dm2 "preprocess --corpus good -o x.tok" "icf-build --corpus good -o x.icf"
# a global option: a bad value on rank 1 alone (it stopped alone, before the command: exit 124),
# another --backend; --threads may differ per rank
expect "a bad global value on rank 1 alone" 2 "docmine: invalid value 'x' for --seed" -- \
    timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu synth -n 20 -k 2 -o sg : -n 1 "$dm" --backend cpu --seed x synth -n 20 -k 2 -o sg
expect "another --backend on rank 1" 2 "rank 1 was given --backend auto, rank 0 --backend cpu" -- \
    timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu synth -n 20 -k 2 -o sg : -n 1 "$dm" synth -n 20 -k 2 -o sg
exits "--threads differing per rank runs" 0 "" -- \
    timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --threads 1 synth -n 20 -k 2 -o sg : -n 1 "$dm" --backend cpu --threads 2 synth -n 20 -k 2 -o sg
# --threads on some ranks only (the others took the node's collective thread default alone: a hang)
exits "--threads on rank 1 only runs" 0 "" -- \
    timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu synth -n 20 -k 2 -o sg : -n 1 "$dm" --backend cpu --threads 1 synth -n 20 -k 2 -o sg
exits "--threads on rank 0 only runs" 0 "" -- \
    timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --threads 2 info : -n 1 "$dm" --backend cpu info
# dmw <args...>: 2 ranks, the same arguments, rank 0 in folder A and rank 1 in B: a relative path
# names another file on each rank, as on node-local disks
dmw() { timeout 60 "$mpiexec" -n 1 -wdir "$tmp/A" "$dm" --backend cpu "$@" : -n 1 -wdir "$tmp/B" "$dm" --backend cpu "$@"; }
mkdir -p A/c B/c
cp good/p0.jsonl good/p1.jsonl A/c/ && cp good/p0.jsonl B/c/ && head -n 30 good/p1.jsonl > B/c/p1.jsonl
cat good/p*.jsonl > A/one.jsonl && head -n 200 A/one.jsonl > B/one.jsonl
printf 'oil\n' > A/sw.txt && printf 'oil\nbank\n' > B/sw.txt
expect "pipeline: another corpus file on rank 1" 1 "corpus one.jsonl: one.jsonl is [0-9]+ bytes on rank 1, [0-9]+ bytes on rank 0: not the same corpus" -- \
    dmw pipeline --quiet --corpus one.jsonl -o "$tmp/pw"
expect "vectorize: a shorter file of the corpus on rank 1" 1 "corpus c: c/p1.jsonl is [0-9]+ bytes on rank 1" -- \
    dmw vectorize --corpus c -o "$tmp/w.dmv"
rm B/c/p1.jsonl
expect "preprocess: a file of the corpus missing on rank 1" 1 "corpus c: rank 0 lists p1.jsonl, which rank 1 does not" -- \
    dmw preprocess --corpus c -o "$tmp/w.tok"
expect "icf-build: another stop-word list on rank 1" 1 "stop words sw.txt: another list on rank 1 than on rank 0" -- \
    dmw icf-build --corpus "$tmp/good" --stopwords sw.txt -o "$tmp/w.icf"
expect "pipeline: another stop-word list on rank 1" 1 "stop words sw.txt: another list on rank 1" -- \
    dmw pipeline --corpus "$tmp/good" --stopwords sw.txt -o "$tmp/pw"
dmn 1 icf-build --quiet --corpus good -o A/t.icf && dmn 1 icf-build --quiet --corpus few -o B/t.icf
expect "vectorize --icf: another table on rank 1" 1 "t.icf: another ICF table on rank 1 than on rank 0" -- \
    dmw vectorize --corpus "$tmp/good" --icf t.icf -o "$tmp/wi.dmv"
# the output's folder another one on each rank (MPI-IO opens one file of every rank): an error,
# and no temporary file left behind in rank 0's (it was, empty)
expect "vectorize: the output's folder another one on rank 1" 1 "v\.dmv\.tmp\.[0-9]+: MPI_File_open failed" -- \
    dmw vectorize --corpus "$tmp/good" -o v.dmv
check "vectorize: no temporary left in rank 0's folder" '[ -z "$(ls A | grep tmp)" ]' "$(ls A)"
mkdir -p A/od
expect "vectorize: the output's folder only on rank 0" 1 "od/v\.dmv\.tmp\.[0-9]+: MPI_File_open failed" -- \
    dmw vectorize --corpus "$tmp/good" -o od/v.dmv
check "vectorize: no temporary left in rank 0's folder (the folder only there)" '[ -z "$(ls A/od)" ]' "$(ls A/od)"

# ---- 9. OUTDIR/name longer than a path may be: refused before the run, naming the path -----------
# (snprintf cut it to the buffer; the write after the whole run failed with a message that was the
# path's first 700 bytes, without the problem)
long=$(python3 -c 'import os, sys
p = sys.argv[1]
while len(p) < 3800: p += "/" + "d" * 200
os.makedirs(p)
print(p + "/" + "e" * (4050 - len(p) - 1))' "$tmp/L")
expect "pipeline: OUTDIR/flock-labels.png too long" 2 "e/flock-labels.png: path too long \(4067 bytes, at most 4063\)" -- \
    dmn 2 pipeline --corpus good -o "$long"
expect "synth: OUTDIR/part-00000.tsv too long" 2 "e/part-00000.tsv: path too long \(4065 bytes" -- dmn 2 synth -n 20 -k 2 -o "$long"
expect "preprocess: OUTPUT fits, OUTPUT.rank0 does not" 2 "eeeeeeeeee\.rank0: path too long \(4096 bytes" -- \
    dmn 2 preprocess --corpus good -o "${long}eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
expect "vectorize --export: OUTPUT.mtx fits, the --vocab file does not" 2 "e\.voc\.tsv: path too long \(4064 bytes" -- \
    dmn 2 vectorize --corpus good -o "$long" --export mtx --vocab "${long}eeeeee.voc.tsv"
expect "flock: OUTDIR/flock-labels.png too long" 2 "e/flock-labels.png: path too long \(4067 bytes" -- dmn 2 flock --synth 100 -o "$long"
expect "flock: the PNG series' names too long" 2 "e/snapshots/flock-000030.png: path too long" -- \
    dmn 2 flock --synth 100 --iterations 30 --snapshot-every 10 -o "$long"
expect "streamclust: OUTDIR/assignments.tsv too long" 2 "e/assignments.tsv: path too long \(4066 bytes" -- \
    dmn 2 streamclust 2 4 8 100 100 100 -o "$long"
expect "--report FILE too long" 2 "docmine: --report .*/r\.json: path too long" -- dmn 2 --report "${long}eeeeeeeeeeeeeeee/r.json" synth -n 20 -k 2 -o "$tmp/sr"
# --report may differ per rank, and rank 0 writes it: another rank's is not checked (its own
# check stopped it alone, rank 0 waited in a collective: exit 124)
exits "--report FILE too long on rank 1 only: runs" 0 "" -- timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --quiet synth \
    -n 20 -k 2 -o "$tmp/sr1" : -n 1 "$dm" --backend cpu --quiet --report "${long}eeeeeeeeeeeeeeee/r.json" synth -n 20 -k 2 -o "$tmp/sr1"
expect "--report FILE too long on rank 0 only" 2 "docmine: --report .*/r\.json: path too long" -- timeout 60 "$mpiexec" -n 1 \
    "$dm" --backend cpu --report "${long}eeeeeeeeeeeeeeee/r.json" synth -n 20 -k 2 -o "$tmp/sr1" : -n 1 "$dm" --backend cpu synth -n 20 -k 2 -o "$tmp/sr1"
check "long paths: nothing written" '[ -z "$(ls "$(dirname "$long")")" ]'
# vectorize --tokens on one rank reads STREAM itself (not STREAM.rank0): a STREAM of 4063 bytes,
# written by preprocess on one rank, is read (was: refused as STREAM.rank0, 4069 bytes)
exits "preprocess, 1 rank: STREAM of 4063 bytes" 0 "" -- dmn 1 preprocess --quiet --corpus good -o "${long}eeeeeeeeeeeee"
exits "vectorize --tokens, 1 rank: STREAM of 4063 bytes" 0 "" -- dmn 1 vectorize --quiet --tokens "${long}eeeeeeeeeeeee" -o "$tmp/lt.dmv"
rm -f "${long}eeeeeeeeeeeee"
# preprocess --report on rank 0 only (rank 0 writes it): rank 0 alone entered the report's
# collectives (exit 124)
exits "preprocess --report on rank 0 only" 0 "" -- timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --quiet --report "$tmp/pr0.json" \
    preprocess --corpus good -o "$tmp/pr0.tok" : -n 1 "$dm" --backend cpu --quiet preprocess --corpus good -o "$tmp/pr0.tok"
check "preprocess --report on rank 0 only: written" '[ -s "$tmp/pr0.json" ]'
# every command: rank 0's --report is the run's (main gives it to every rank): rank 1 given none
# (it skipped the report's collectives: a hang) or another one (nothing of its own written)
for c in "vectorize --corpus good -o $tmp/vr0.dmv" "pipeline --corpus good -o $tmp/pl0"; do
    exits "--report on rank 0 only: ${c%% *}" 0 "" -- timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --quiet \
        --report "$tmp/r0-${c%% *}.json" $c : -n 1 "$dm" --backend cpu --quiet $c
    check "--report on rank 0 only: ${c%% *}: written" '[ -s "$tmp/r0-${c%% *}.json" ]'
done
exits "--report another on rank 1: streamclust" 0 "" -- timeout 60 "$mpiexec" -n 1 "$dm" --backend cpu --quiet \
    --report "$tmp/r0-sc.json" streamclust 2 4 8 100 100 100 -o "$tmp/sc0" : -n 1 "$dm" --backend cpu --quiet \
    --report "$tmp/r1-sc.json" streamclust 2 4 8 100 100 100 -o "$tmp/sc0"
check "--report another on rank 1: rank 0's written, rank 1's not" '[ -s "$tmp/r0-sc.json" ] && [ ! -e "$tmp/r1-sc.json" ]'

finish
