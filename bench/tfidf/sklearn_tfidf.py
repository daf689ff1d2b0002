#!/usr/bin/env python3
"""Peer measurement for bench_tfidf: scikit-learn's TfidfVectorizer (English stop words, its token
pattern, smooth idf, L2) fitted and applied to the Reuters SGML files of a corpus folder (TITLE +
BODY; symbolic links followed, files in sorted path order), timed from reading the files to the
sparse matrix, on one core, in the same run as docmine.
usage: sklearn_tfidf.py DIR [MAX_BYTES]  (MAX_BYTES > 0: stop after the files holding that many
bytes, for a stated prefix of a large corpus)
Prints "GB/s bytes" (raw file bytes read) on stdout and a summary line on stderr."""
import glob, html, os, re, sys, time
from sklearn.feature_extraction.text import TfidfVectorizer

root = sys.argv[1]
max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 0
files = sorted(glob.glob(os.path.join(root, "**", "*.sgm"), recursive=True))
t0 = time.perf_counter()
raw = 0
docs = []
rec = re.compile(r"<REUTERS.*?</REUTERS>", re.S)
part = re.compile(r"<(TITLE|BODY)>(.*?)</\1>", re.S)
for f in files:
    if max_bytes > 0 and raw >= max_bytes:
        break
    data = open(f, "rb").read()
    raw += len(data)
    text = data.decode("utf-8", "replace")
    for r in rec.findall(text):
        docs.append(html.unescape(" ".join(m[1] for m in part.findall(r))))
X = TfidfVectorizer(stop_words="english").fit_transform(docs)
t1 = time.perf_counter()
print(f"{raw / (t1 - t0) / 1e9:.6f} {raw}")
print(f"# {len(docs)} docs, {X.shape[1]} terms, {X.nnz} non-zeros, {raw} bytes, {t1 - t0:.2f} s", file=sys.stderr)
