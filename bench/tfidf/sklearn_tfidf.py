#!/usr/bin/env python3
"""Peer measurement for bench_tfidf: scikit-learn's TfidfVectorizer (English stop words, its token
pattern, smooth idf, L2) fitted and applied to the Reuters SGML files of a corpus folder (TITLE +
BODY; *.sgm and *.sgm.gz, read through gzip; symbolic links followed, files in sorted path order),
timed from reading the files to the sparse matrix, on one core, in the same run as docmine.
usage: sklearn_tfidf.py DIR [MAX_BYTES]  (MAX_BYTES > 0: stop after the files holding that many
bytes, for a stated prefix of a large corpus)
Prints "GB/s bytes" (raw, decompressed file bytes read) on stdout and a summary line on stderr;
exits 1 with a message naming the problem (scikit-learn not installed, DIR missing, no Reuters
files in it), 2 on bad arguments."""
import glob, gzip, html, os, re, sys, time

if not 2 <= len(sys.argv) <= 3 or sys.argv[1] in ("-h", "--help"):
    print("usage: sklearn_tfidf.py DIR [MAX_BYTES]", file=sys.stderr)
    sys.exit(0 if len(sys.argv) == 2 else 2)
try:
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if max_bytes < 0:
        raise ValueError
except ValueError:
    print(f"sklearn_tfidf.py: MAX_BYTES '{sys.argv[2]}' is not a whole number >= 0", file=sys.stderr)
    sys.exit(2)
try:
    from sklearn.feature_extraction.text import TfidfVectorizer
except ImportError as e:
    sys.exit(f"sklearn_tfidf.py: scikit-learn is not installed ({e}): pip install scikit-learn")

root = sys.argv[1]
if not os.path.isdir(root):
    sys.exit(f"sklearn_tfidf.py: {root}: not a directory")
files = sorted(glob.glob(os.path.join(glob.escape(root), "**", "*.sgm"), recursive=True) +
               glob.glob(os.path.join(glob.escape(root), "**", "*.sgm.gz"), recursive=True))
if not files:
    sys.exit(f"sklearn_tfidf.py: {root}: no Reuters SGML files (*.sgm, *.sgm.gz)")
t0 = time.perf_counter()
raw = 0
docs = []
rec = re.compile(r"<REUTERS.*?</REUTERS>", re.S)
part = re.compile(r"<(TITLE|BODY)>(.*?)</\1>", re.S)
for f in files:
    if max_bytes > 0 and raw >= max_bytes:
        break
    with (gzip.open(f, "rb") if f.endswith(".gz") else open(f, "rb")) as fh:
        data = fh.read()
    raw += len(data)
    text = data.decode("utf-8", "replace")
    for r in rec.findall(text):
        docs.append(html.unescape(" ".join(m[1] for m in part.findall(r))))
X = TfidfVectorizer(stop_words="english").fit_transform(docs)
t1 = time.perf_counter()
print(f"{raw / (t1 - t0) / 1e9:.6f} {raw}")
print(f"# {len(docs)} docs, {X.shape[1]} terms, {X.nnz} non-zeros, {raw} bytes, {t1 - t0:.2f} s", file=sys.stderr)
