#!/usr/bin/env python3
"""Peer measurement for bench_preprocess: scikit-learn's TfidfVectorizer analyzer (lower case,
English stop words, its token pattern) over the same Reuters SGML files (TITLE + BODY), reported
as GB/s of raw file bytes, on one core, in the same run. Prints one number."""
import glob, html, os, re, sys, time
from sklearn.feature_extraction.text import TfidfVectorizer

root = sys.argv[1]
files = sorted(glob.glob(os.path.join(root, "**", "*.sgm"), recursive=True))
t0 = time.perf_counter()
raw = 0
docs = []
rec = re.compile(r"<REUTERS.*?</REUTERS>", re.S)
part = re.compile(r"<(TITLE|BODY)>(.*?)</\1>", re.S)
for f in files:
    data = open(f, "rb").read()
    raw += len(data)
    text = data.decode("utf-8", "replace")
    for r in rec.findall(text):
        docs.append(html.unescape(" ".join(m[1] for m in part.findall(r))))
analyze = TfidfVectorizer(stop_words="english").build_analyzer()
n = 0
for d in docs:
    n += len(analyze(d))
t1 = time.perf_counter()
print(f"{raw / (t1 - t0) / 1e9:.6f}")
print(f"# {len(docs)} docs, {n} tokens, {t1 - t0:.2f} s", file=sys.stderr)
