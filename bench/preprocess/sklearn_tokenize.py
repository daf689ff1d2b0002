#!/usr/bin/env python3
"""Peer measurement for bench_preprocess: scikit-learn's TfidfVectorizer analyzer (lower case,
English stop words, its token pattern) over the same Reuters SGML files (TITLE + BODY; *.sgm and
*.sgm.gz, read through gzip as docmine does), reported as GB/s of raw (decompressed) file bytes,
the bytes bench_preprocess counts, on one core, in the same run.
usage: sklearn_tokenize.py DIR
Prints one number on stdout and a summary line on stderr; exits 1 with a message naming the
problem (scikit-learn not installed, DIR missing, no Reuters files in it), 2 on bad arguments."""
import glob, gzip, html, os, re, sys, time

if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print("usage: sklearn_tokenize.py DIR", file=sys.stderr)
    sys.exit(0 if len(sys.argv) == 2 else 2)
try:
    from sklearn.feature_extraction.text import TfidfVectorizer
except ImportError as e:
    sys.exit(f"sklearn_tokenize.py: scikit-learn is not installed ({e}): pip install scikit-learn")

root = sys.argv[1]
if not os.path.isdir(root):
    sys.exit(f"sklearn_tokenize.py: {root}: not a directory")
files = sorted(glob.glob(os.path.join(glob.escape(root), "**", "*.sgm"), recursive=True) +
               glob.glob(os.path.join(glob.escape(root), "**", "*.sgm.gz"), recursive=True))
if not files:
    sys.exit(f"sklearn_tokenize.py: {root}: no Reuters SGML files (*.sgm, *.sgm.gz)")
t0 = time.perf_counter()
raw = 0
docs = []
rec = re.compile(r"<REUTERS.*?</REUTERS>", re.S)
part = re.compile(r"<(TITLE|BODY)>(.*?)</\1>", re.S)
for f in files:
    with (gzip.open(f, "rb") if f.endswith(".gz") else open(f, "rb")) as fh:
        data = fh.read()
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
print(f"# {len(docs)} docs, {n} tokens, {raw} bytes, {t1 - t0:.2f} s", file=sys.stderr)
