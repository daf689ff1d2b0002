#!/usr/bin/env python3
"""An independent oracle for `docmine vectorize` and `docmine icf-build` (pure Python, no numpy).

From the tokens docmine itself produces (`docmine preprocess --dump-tokens`: id<TAB>labels<TAB>
stems, one document a line, in corpus order) it recomputes what tfidf/tfidf.h documents:
term counts per document, df over all documents (N = every document, empty ones included), the
vocabulary (terms kept by min_df / max_df, id = position in byte order), idf (log: ln(N/df);
sklearn: ln((1+N)/(1+df)) + 1), tf (count / sum of the document's vocabulary counts, or
sublinear 1 + ln count), w = tf x idf with entries of weight exactly 0 not stored, L2 over the
row, and TF-ICF with a table (icf = ln(N_ref/cf), tokens of terms absent from the table dropped
before tf). It reads the .dmv file itself (the layout at dm_vectors_write, every check of the
reader: magic, version, header CRC, sizes, offsets, columns, trailing CRC and "END\\n") and
compares every weight with a relative tolerance of 1e-6 (float32 storage of a double; the
largest error seen is printed), every column id, row order, ids and labels; the vocabulary TSV,
the SVMlight / MatrixMarket exports (values equal to the .dmv's floats after float32 rounding)
and the report's counters.

usage:
  vectorize_oracle.py check --tokens DUMP --dmv FILE [--idf log|sklearn] [--sublinear] [--no-l2]
                            [--min-df X] [--max-df X] [--icf TABLE] [--vocab TSV] [--svm FILE]
                            [--mtx FILE] [--report JSON]
  vectorize_oracle.py icf --tokens DUMP --table FILE [--vocab TSV] [--no-stem] [--keep-numbers]
                          [--min-len N] [--max-len N] [--no-stopwords]
  vectorize_oracle.py gen DIR     adversarial corpora (one folder each) under DIR
Exit status 0 when everything agrees; otherwise the first differences are printed, status 1.
"""
import json
import math
import os
import struct
import sys
import zlib

RTOL = 1e-6
MAX_REPORTED = 10


class Mismatch(Exception):
    pass


class Checker:
    def __init__(self, what):
        self.what = what
        self.errors = []
        self.max_rel = 0.0

    def fail(self, msg):
        self.errors.append(msg)
        if len(self.errors) > 200:
            raise Mismatch(self.summary())

    def eq(self, name, got, want):
        if got != want:
            self.fail("%s: docmine %r, oracle %r" % (name, got, want))

    def summary(self):
        lines = ["%s: %d difference(s)" % (self.what, len(self.errors))]
        lines += ["  " + e for e in self.errors[:MAX_REPORTED]]
        return "\n".join(lines)


# ------------------------------------------------------------------------------- inputs

def read_dump(path):
    """Documents of a --dump-tokens file: list of (id bytes, labels bytes, [stem bytes])."""
    docs = []
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        raise Mismatch("%s: the last line has no newline" % path)
    for ln, line in enumerate(data.split(b"\n")[:-1] if data else [], 1):
        parts = line.split(b"\t", 2)
        if len(parts) != 3:
            raise Mismatch("%s:%d: not id<TAB>labels<TAB>stems: %r" % (path, ln, line[:80]))
        # (an empty stem, Porter's "s" -> "" under --min-len 1, cannot be told from no stem on a
        # line of its own: the tests keep the default --min-len 2)
        stems = parts[2].split(b" ") if parts[2] else []
        docs.append((parts[0], parts[1], stems))
    return docs


def parse_df(x):
    """--min-df / --max-df as the CLI reads them: a '.' or an exponent makes a fraction of N."""
    if x is None:
        return None
    if any(c in x for c in ".eE"):
        return ("frac", float(x))
    return ("count", int(x))


def df_keeps(df, n, lo, hi):
    """A term of df documents among n is kept (tfidf.h: min_df / max_df, decided on df / n)."""
    if lo is not None:
        if lo[0] == "count" and df < lo[1]:
            return False
        if lo[0] == "frac" and not (df / n >= lo[1]):
            return False
    if hi is not None:
        if hi[0] == "count" and df > hi[1]:
            return False
        if hi[0] == "frac" and not (df / n <= hi[1]):
            return False
    return True


def read_dmv(path, c):
    """The .dmv file (tfidf.h, dm_vectors_write), every structural check of the reader."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 72:
        raise Mismatch("%s: %d bytes, shorter than a header and trailer" % (path, len(b)))
    if b[:8] != b"DMVECS\0\1":
        raise Mismatch("%s: bad magic %r" % (path, b[:8]))
    version, flags = struct.unpack_from("<II", b, 8)
    n_rows, n_cols, nnz, id_bytes, label_bytes = struct.unpack_from("<5Q", b, 16)
    hcrc, pad = struct.unpack_from("<II", b, 56)
    c.eq("dmv version", version, 1)
    c.eq("dmv header crc", hcrc, zlib.crc32(b[:56]) & 0xFFFFFFFF)
    c.eq("dmv header padding", pad, 0)
    want = 64 + 8 * (n_rows + 1) + 4 * nnz + 4 * nnz + 8 * (n_rows + 1) + id_bytes + 8 * (n_rows + 1) + label_bytes + 8
    if len(b) != want:
        raise Mismatch("%s: %d bytes, the header says %d" % (path, len(b), want))
    c.eq("dmv trailer", b[-4:], b"END\n")
    c.eq("dmv crc", struct.unpack_from("<I", b, len(b) - 8)[0], zlib.crc32(b[:-8]) & 0xFFFFFFFF)
    o = 64
    row_off = struct.unpack_from("<%dQ" % (n_rows + 1), b, o)
    o += 8 * (n_rows + 1)
    col = struct.unpack_from("<%dI" % nnz, b, o)
    o += 4 * nnz
    val = struct.unpack_from("<%df" % nnz, b, o)
    o += 4 * nnz
    id_off = struct.unpack_from("<%dQ" % (n_rows + 1), b, o)
    o += 8 * (n_rows + 1)
    ids = b[o:o + id_bytes]
    o += id_bytes
    label_off = struct.unpack_from("<%dQ" % (n_rows + 1), b, o)
    o += 8 * (n_rows + 1)
    labels = b[o:o + label_bytes]
    for name, off, total in (("row_off", row_off, nnz), ("id_off", id_off, id_bytes), ("label_off", label_off, label_bytes)):
        c.eq("dmv %s[0]" % name, off[0], 0)
        c.eq("dmv %s[n_rows]" % name, off[-1], total)
        if any(off[i] > off[i + 1] for i in range(n_rows)):
            c.fail("dmv %s falls back" % name)
    rows = []
    for r in range(n_rows):
        cols = col[row_off[r]:row_off[r + 1]]
        vals = val[row_off[r]:row_off[r + 1]]
        if any(cols[i] >= cols[i + 1] for i in range(len(cols) - 1)):
            c.fail("dmv row %d: columns not strictly increasing" % r)
        if any(x >= n_cols for x in cols):
            c.fail("dmv row %d: a column >= n_cols %d" % (r, n_cols))
        if any(not math.isfinite(v) for v in vals):
            c.fail("dmv row %d: a weight that is not finite" % r)
        rid = ids[id_off[r]:id_off[r + 1]]
        lab = labels[label_off[r]:label_off[r + 1]]
        # ids and labels are stored NUL-terminated (the writer refuses others)
        if not rid.endswith(b"\0") or not lab.endswith(b"\0"):
            c.fail("dmv row %d: id or label not NUL-terminated" % r)
        rows.append((rid.rstrip(b"\0"), lab.rstrip(b"\0"), list(zip(cols, vals))))
    return {"flags": flags, "n_rows": n_rows, "n_cols": n_cols, "nnz": nnz, "rows": rows}


def read_icf(path):
    """The ICF table (tfidf.h, docmine icf-build), checked as dm_icf_table_read checks it."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"DMICF\0\0\1":
        raise Mismatch("%s: bad magic" % path)
    version, flags, min_len, max_len = struct.unpack_from("<4I", b, 8)
    fp, n_ref, n_terms, term_bytes = struct.unpack_from("<4Q", b, 24)
    o = 56
    want = o + 8 * n_terms * 2 + 8 * (n_terms + 1) + term_bytes + 8
    if len(b) != want:
        raise Mismatch("%s: %d bytes, the header says %d" % (path, len(b), want))
    if b[-4:] != b"END\n" or struct.unpack_from("<I", b, len(b) - 8)[0] != zlib.crc32(b[:-8]) & 0xFFFFFFFF:
        raise Mismatch("%s: bad trailer or checksum" % path)
    hashes = struct.unpack_from("<%dQ" % n_terms, b, o)
    o += 8 * n_terms
    cf = struct.unpack_from("<%dQ" % n_terms, b, o)
    o += 8 * n_terms
    off = struct.unpack_from("<%dQ" % (n_terms + 1), b, o)
    o += 8 * (n_terms + 1)
    tb = b[o:o + term_bytes]
    terms = [tb[off[i]:off[i + 1]] for i in range(n_terms)]
    return {"version": version, "flags": flags, "min_len": min_len, "max_len": max_len, "stop_fp": fp,
            "n_ref": n_ref, "terms": terms, "cf": list(cf), "hash": hashes}


def tsv_unescape(s):
    out, i = bytearray(), 0
    while i < len(s):
        if s[i:i + 1] == b"\\" and i + 1 < len(s):
            out += {b"t": b"\t", b"n": b"\n", b"\\": b"\\"}.get(s[i + 1:i + 2], s[i:i + 2])
            i += 2
        else:
            out += s[i:i + 1]
            i += 1
    return bytes(out)


# ------------------------------------------------------------------------------- the oracle

def counts_of(stems):
    d = {}
    for s in stems:
        d[s] = d.get(s, 0) + 1
    return d


def weigh(docs_counts, col_of, col_w, sublinear, l2):
    """Rows of (column, weight in double) as tfidf.h defines them; also zero-weight entries and
    unmapped tokens (those of terms without a column)."""
    rows, zero, unmapped = [], 0, 0
    for cnt in docs_counts:
        length = sum(n for t, n in cnt.items() if t in col_of)
        unmapped += sum(n for t, n in cnt.items() if t not in col_of)
        ent = []
        for t, n in cnt.items():
            if t not in col_of:
                continue
            cidx = col_of[t]
            if col_w[cidx] == 0.0:
                zero += 1
                continue
            tf = 1.0 + math.log(n) if sublinear else n / length
            ent.append((cidx, tf * col_w[cidx]))
        ent.sort()
        if l2 and ent:
            norm = math.sqrt(math.fsum(w * w for _, w in ent))
            ent = [(cidx, w / norm) for cidx, w in ent]
        rows.append(ent)
    return rows, zero, unmapped


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def compare_rows(c, got, want_rows, docs):
    c.eq("rows", got["n_rows"], len(docs))
    for r, (doc, (rid, lab, ent)) in enumerate(zip(docs, got["rows"])):
        # the dump writes tabs and line breaks of ids and labels as spaces
        sp = lambda s: s.replace(b"\t", b" ").replace(b"\n", b" ").replace(b"\r", b" ")
        if sp(rid) != doc[0]:
            c.fail("row %d: id %r, the dump's document %d is %r (row order)" % (r, rid, r, doc[0]))
        if sp(lab) != doc[1]:
            c.fail("row %d (%r): labels %r, expected %r" % (r, doc[0], lab, doc[1]))
        want = want_rows[r]
        if [x for x, _ in ent] != [x for x, _ in want]:
            c.fail("row %d (%r): columns %s, expected %s" % (r, doc[0], [x for x, _ in ent][:12], [x for x, _ in want][:12]))
            continue
        for (col, v), (_, w) in zip(ent, want):
            rel = abs(v - w) / abs(w) if w != 0 else abs(v)
            c.max_rel = max(c.max_rel, rel)
            if not rel <= RTOL:
                c.fail("row %d (%r) column %d: weight %.9g, expected %.12g (relative error %.2e)" % (r, doc[0], col, v, w, rel))


def check_vocab_tsv(c, path, terms, vals, val_name):
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    c.eq("vocab TSV header", lines[0], ("id\tterm\t%s" % val_name).encode())
    c.eq("vocab TSV ends with a newline", lines[-1], b"")
    body = lines[1:-1]
    c.eq("vocab TSV lines", len(body), len(terms))
    for i, line in enumerate(body[:len(terms)]):
        p = line.split(b"\t")
        if len(p) != 3:
            c.fail("vocab TSV line %d: %r" % (i + 2, line))
            continue
        if p[0] != str(i).encode() or tsv_unescape(p[1]) != terms[i] or p[2] != str(vals[i]).encode():
            c.fail("vocab TSV line %d: %r, expected id %d term %r %s %d" % (i + 2, line, i, terms[i], val_name, vals[i]))


def check_svm(c, path, got):
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    c.eq("svmlight ends with a newline", lines[-1], b"")
    lines = lines[:-1]
    # label names: the comma-separated parts of the label strings, empty parts left out
    names = sorted({l for _, lab, _ in got["rows"] for l in lab.split(b",") if l})
    clean = lambda s: bytes(ch if ch >= 0x20 else 0x3F for ch in s)  # control bytes print as '?'

    num = {n: i + 1 for i, n in enumerate(names)}
    comments = [l for l in lines if l.startswith(b"#")]
    body = [l for l in lines if not l.startswith(b"#")]
    for n, i in num.items():
        if (b"# label %d " % i) + clean(n) not in comments:
            c.fail("svmlight: no comment line '# label %d %r'" % (i, n))
    c.eq("svmlight rows", len(body), got["n_rows"])
    for r, (line, (rid, lab, ent)) in enumerate(zip(body, got["rows"])):
        head, _, tail = line.partition(b" # ")
        if tail != clean(rid):
            c.fail("svmlight row %d: id %r, expected %r" % (r, tail, rid))
        f = head.split(b" ")
        want_lab = b",".join(b"%d" % num[l] for l in lab.split(b",") if l) or b"0"
        if f[0] != want_lab:
            c.fail("svmlight row %d: labels %r, expected %r" % (r, f[0], want_lab))
        pairs = [x.split(b":") for x in f[1:]]
        if [(int(i) - 1, f32(float(v))) for i, v in pairs] != list(ent):
            c.fail("svmlight row %d: entries differ from the .dmv's (after float32 rounding)" % r)


def check_mtx(c, path, got):
    with open(path, "rb") as f:
        lines = [l for l in f.read().split(b"\n") if l]
    c.eq("mtx banner", lines[0], b"%%MatrixMarket matrix coordinate real general")
    body = [l for l in lines[1:] if not l.startswith(b"%")]
    c.eq("mtx size line", body[0].split(), [b"%d" % got["n_rows"], b"%d" % got["n_cols"], b"%d" % got["nnz"]])
    want = [(r, col, v) for r, (_, _, ent) in enumerate(got["rows"]) for col, v in ent]
    have = []
    for l in body[1:]:
        i, j, v = l.split()
        have.append((int(i) - 1, int(j) - 1, f32(float(v))))
    if sorted(have) != want:
        c.fail("mtx entries differ from the .dmv's (%d entries, %d in the .dmv)" % (len(have), len(want)))


def check_report(c, path, want):
    with open(path) as f:
        r = json.load(f)["results"]
    for k, v in want.items():
        c.eq("report %s" % k, r.get(k), v)


def cmd_check(a):
    c = Checker("vectorize %s" % a["--dmv"])
    docs = read_dump(a["--tokens"])
    got = read_dmv(a["--dmv"], c)
    counts = [counts_of(d[2]) for d in docs]
    n = len(docs)
    sub, l2 = "--sublinear" in a, "--no-l2" not in a
    flags = (1 if l2 else 0) | (2 if sub else 0)
    report = {"docs": n, "tokens": sum(len(d[2]) for d in docs)}
    if "--icf" in a:
        t = read_icf(a["--icf"])
        terms, vals = t["terms"], t["cf"]
        col_w = [math.log(t["n_ref"] / cf) for cf in vals]
        flags |= 4
        val_name = "cf"
    else:
        df = {}
        for cnt in counts:
            for s in cnt:
                df[s] = df.get(s, 0) + 1
        lo, hi = parse_df(a.get("--min-df")), parse_df(a.get("--max-df"))
        terms = sorted(s for s, k in df.items() if df_keeps(k, n, lo, hi))
        vals = [df[s] for s in terms]
        sk = a.get("--idf", "log") == "sklearn"
        col_w = [math.log((1 + n) / (1 + k)) + 1 if sk else math.log(n / k) for k in vals]
        flags |= 8 if sk else 0
        val_name = "df"
        kept = set(terms)
        report["terms_seen"] = len(df)
        report["pruned_min_df"] = sum(1 for s, k in df.items() if s not in kept and not df_keeps(k, n, lo, None))
        report["pruned_max_df"] = len(df) - len(terms) - report["pruned_min_df"]
    col_of = {s: i for i, s in enumerate(terms)}
    rows, zero, unmapped = weigh(counts, col_of, col_w, sub, l2)
    c.eq("n_cols (vocabulary size)", got["n_cols"], len(terms))
    c.eq("nnz", got["nnz"], sum(len(r) for r in rows))
    c.eq("flags", got["flags"], flags)
    compare_rows(c, got, rows, docs)
    report.update({"terms": len(terms), "nnz": sum(len(r) for r in rows), "zero_weight_entries": zero,
                   "empty_docs": sum(1 for r in rows if not r), "icf_unknown_tokens": unmapped if "--icf" in a else 0})
    if "--vocab" in a:
        check_vocab_tsv(c, a["--vocab"], terms, vals, val_name)
    if "--svm" in a:
        check_svm(c, a["--svm"], got)
    if "--mtx" in a:
        check_mtx(c, a["--mtx"], got)
    if "--report" in a:
        check_report(c, a["--report"], report)
    if c.errors:
        raise Mismatch(c.summary())
    print("oracle ok: %s: %d rows, %d columns, %d weights, largest relative error %.2e (tolerance %.0e)"
          % (os.path.basename(a["--dmv"]), got["n_rows"], got["n_cols"], got["nnz"], c.max_rel, RTOL))


def cmd_icf(a):
    c = Checker("icf-build %s" % a["--table"])
    docs = read_dump(a["--tokens"])
    t = read_icf(a["--table"])
    cf = {}
    for d in docs:
        for s in set(d[2]):
            cf[s] = cf.get(s, 0) + 1
    terms = sorted(cf)
    c.eq("version", t["version"], 1)
    c.eq("N_ref", t["n_ref"], len(docs))
    c.eq("flags", t["flags"], (0 if "--no-stem" in a else 1) | (2 if "--keep-numbers" in a else 0))
    c.eq("min_len", t["min_len"], int(a.get("--min-len", 2)))
    c.eq("max_len", t["max_len"], int(a.get("--max-len", 64)))
    if "--no-stopwords" in a:
        c.eq("stop-word fingerprint", t["stop_fp"], 0)
    elif t["stop_fp"] == 0:
        c.fail("stop-word fingerprint 0 with a stop list")
    c.eq("terms (count)", len(t["terms"]), len(terms))
    if t["terms"] != terms:
        diff = [(i, x, y) for i, (x, y) in enumerate(zip(t["terms"], terms)) if x != y][:5]
        c.fail("terms differ (first: %r)" % diff)
    c.eq("cf", t["cf"], [cf[s] for s in terms])
    if len(set(t["hash"])) != len(t["hash"]):
        c.fail("two terms share a hash (no collision was expected on this corpus)")
    if "--vocab" in a:
        check_vocab_tsv(c, a["--vocab"], terms, [cf[s] for s in terms], "cf")
    if c.errors:
        raise Mismatch(c.summary())
    print("oracle ok: %s: N_ref %d, %d terms" % (os.path.basename(a["--table"]), t["n_ref"], len(terms)))


# ------------------------------------------------------------------------------- corpora

def cmd_gen(out):
    def tsv(name, rows):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "c.tsv"), "w", encoding="utf-8") as f:
            for i, (lab, text) in enumerate(rows):
                f.write("%s-%d\t%s\t%s\n" % (name, i, lab, text))

    words = ["market", "price", "stock", "trade", "bank", "rate", "oil", "grain", "wheat", "export",
             "dollar", "yen", "profit", "loss", "share", "merger", "company", "quarter", "growth", "bond"]
    # empty documents, stop-word-only documents, a term in every document (idf 0 in the log form),
    # duplicates, multi-labels and unlabelled documents, non-ASCII text
    rows = []
    for i in range(60):
        if i % 13 == 0:
            text = ""
        elif i % 7 == 0:
            text = "the and of it is was"
        else:
            n = 3 + (i * 37) % 17
            text = "reuters " + " ".join(words[(i * 11 + j * j * 5) % len(words)] for j in range(n))
            if i % 5 == 0:
                text += " café Zürich Ελλάδα μια δοκιμή 東京 株式 naïve coöperate"
            if i % 9 == 0:
                text = "reuters reuters reuters"  # only the term in every non-empty document
        lab = ["", "a", "b,c", "c"][i % 4]
        rows.append((lab, text))
    rows += [rows[3], rows[3], rows[5]]  # duplicate documents
    tsv("mixed", rows)
    # every document holds every term: all log-idf weights 0, every row empty
    tsv("allsame", [("x", "apple banana cherry"), ("y", "cherry banana apple apple")] * 3)
    # a term in every document beside others: its log idf is 0, its entries are not stored, but
    # it still counts in tf's denominator (visible with --no-l2)
    tsv("every", [("e", "common " * (1 + i % 3) + " ".join(words[(i + j) % len(words)] for j in range(i % 6)))
                  for i in range(25)])
    # one document
    tsv("one", [("only", "solitary document with words words words repeated")])
    # very long documents (tens of thousands of tokens), skewed counts
    long_rows = []
    for i in range(4):
        toks = []
        for j in range(30000 + 7000 * i):
            toks.append(words[(j * j + i * 3) % len(words)] if j % 3 else words[i % 5])
        long_rows.append(("long", " ".join(toks)))
    long_rows.append(("short", "market"))
    tsv("long", long_rows)


def parse_args(argv):
    a, i = {}, 0
    flags = {"--sublinear", "--no-l2", "--no-stem", "--keep-numbers", "--no-stopwords"}
    while i < len(argv):
        if argv[i] in flags:
            a[argv[i]] = True
            i += 1
        else:
            a[argv[i]] = argv[i + 1]
            i += 2
    return a


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if sys.argv[1] == "check":
            cmd_check(parse_args(sys.argv[2:]))
        elif sys.argv[1] == "icf":
            cmd_icf(parse_args(sys.argv[2:]))
        elif sys.argv[1] == "gen":
            cmd_gen(sys.argv[2])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except Mismatch as e:
        print(str(e))
        return 1
    except (OSError, ValueError, struct.error) as e:
        print("oracle: unreadable input: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
