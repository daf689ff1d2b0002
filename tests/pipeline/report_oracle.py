#!/usr/bin/env python3
"""An independent oracle for what docmine's result files claim (DESIGN.md section 8, README
"The pipeline"): reads one output folder of `docmine flock`, `docmine streamclust --vectors` or
`docmine pipeline --method flock|streamclust` and recomputes, from the per-document files and the
corpus alone (pure Python, no docmine code):

  - the documents: every input document exactly once, in corpus order (files in byte order of
    their paths, records in file order; synthetic: synth-0 .. synth-N-1), its labels joined by
    commas, tabs and line breaks written as spaces (assignments.tsv) or RFC 4180 quoted
    (positions.csv);
  - clusters.tsv: clusters 0..K-1 in order then the noise row -1, sizes equal to the counts of
    assignments.tsv, top-term weights positive and non-increasing;
  - the quality: NMI (arithmetic-mean normalisation, scikit-learn's conventions for degenerate
    labelings), ARI (from the pair-counting definition, scikit-learn's convention for full
    agreement), purity; a document's class is its first label (bytes before the first comma,
    compared byte for byte, taken from the corpus when it is given), documents with an empty
    first label are unlabelled and left out, noise (-1) is one cluster; no quality without a
    labelled document;
  - report.json: counts (documents, clusters, noise, labelled documents, classes, ranks, empty
    documents, skips), the timers named by the report present with 0 <= min <= avg <= max, every
    "seconds" figure within its timer's range over ranks, throughput figures equal to the counts
    over the time they name, the outputs list equal to the files written;
  - flock: positions.csv the rows of assignments.tsv, inside the final plane; streamclust
    --vectors: centers.txt's K centres, weights summing to N, centre ids as assignments.tsv says,
    total_cost the sum of the squared distances;
  - with --plain-words (a corpus of lower-case words, docmine run with --no-stem --no-stopwords):
    clusters.tsv's top terms, each cluster's heaviest terms by summed TF-IDF weight, recomputed.

usage: report_oracle.py DIR --kind pipeline|flock|streamclust [--method flock|streamclust]
         [--ranks N] [--corpus PATH] [--synthetic N] [--expect-empty K] [--expect-skipped K]
         [--iterations N] [--top-k K] [--streamclust-n N] [--plain-words]
(--synthetic with --corpus: `docmine synth`'s file of the same documents gives ids and labels.)
Prints one line per failed check and exits 1, else "ok: N checks" and 0.
"""
import csv
import gzip
import json
import math
import os
import re
import sys
from collections import Counter

ERRS = []
N_CHECKS = [0]


def check(cond, msg):
    N_CHECKS[0] += 1
    if not cond:
        ERRS.append(msg)
    return cond


def close(a, b, rel=1e-6, abs_=1e-9):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


# ---- the corpus, read independently ----------------------------------------------------------

def json_scalar_text(v):
    """A JSON scalar as docmine keeps it: a string as is, a number as its JSON text."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        return v.encode('utf-8', 'surrogatepass')
    if isinstance(v, int):
        return str(v).encode()
    return None  # floats: their JSON text is not kept by json.loads (the corpora here have none)


def read_jsonl(path, name, data):
    docs, skipped = [], 0
    for ln, line in enumerate(data.split(b'\n'), 1):
        s = line.strip(b' \t\r')
        if not s:
            continue
        try:
            o = json.loads(s.decode('utf-8'))
        except (ValueError, UnicodeDecodeError):
            skipped += 1
            continue
        if not isinstance(o, dict) or not isinstance(o.get('text'), str):
            skipped += 1
            continue
        did = json_scalar_text(o['id']) if 'id' in o else None
        if did is None:
            did = ('%s:%d' % (name, ln)).encode()
        jl = o['label'] if 'label' in o else o.get('labels')
        labs, bad = [], False
        if jl is None:
            pass
        elif isinstance(jl, list):
            for e in jl:
                if e is None:
                    continue
                t = json_scalar_text(e)
                if t is None or b',' in t:
                    bad = True
                    break
                if t:
                    labs.append(t)
        else:
            t = json_scalar_text(jl)
            if t is None:
                bad = True
            elif t:
                labs.append(t)
        if bad:
            skipped += 1
            continue
        docs.append((did, b','.join(labs), o['text']))
    return docs, skipped


def read_tsv(path, name, data):
    docs, skipped = [], 0
    for line in data.split(b'\n'):
        if line.endswith(b'\r'):
            line = line[:-1]
        if not line:
            continue
        f = line.split(b'\t', 2)
        if len(f) < 3 or not f[0]:
            skipped += 1
            continue
        docs.append((f[0], f[1], f[2].decode('utf-8', 'replace')))
    return docs, skipped


REC = re.compile(rb'<REUTERS\b([^>]*)>(.*?)</REUTERS>', re.S)


def read_sgml(path, name, data):
    docs = []
    for m in REC.finditer(data):
        nid = re.search(rb'NEWID="([^"]*)"', m.group(1))
        body = m.group(2)
        tm = re.search(rb'<TOPICS>(.*?)</TOPICS>', body, re.S)
        labs = re.findall(rb'<D>(.*?)</D>', tm.group(1), re.S) if tm else []
        docs.append((nid.group(1) if nid else b'', b','.join(labs), ''))
    return docs, 0


def read_corpus(root):
    """[(id bytes, labels bytes, text)], skipped records, bytes of text read. Files in byte order
    of their paths."""
    files = []
    if os.path.isdir(root):
        for d, _, fs in os.walk(root):
            for f in fs:
                files.append(os.path.join(d, f))
        files.sort(key=lambda p: os.fsencode(os.path.relpath(p, root)))
    else:
        files = [root]
    docs, skipped, nbytes = [], 0, 0
    for p in files:
        rel = os.path.relpath(p, root) if os.path.isdir(root) else os.path.basename(p)
        opener = gzip.open if p.endswith('.gz') else open
        with opener(p, 'rb') as f:
            data = f.read()
        base = p[:-3] if p.endswith('.gz') else p
        name = rel[:-3] if rel.endswith('.gz') else rel
        reader = (read_jsonl if base.endswith(('.jsonl', '.ndjson')) else read_tsv if base.endswith('.tsv')
                  else read_sgml if base.endswith('.sgm') else None)
        if reader is None:
            continue
        d, s = reader(p, name, data)
        docs += d
        skipped += s
        nbytes += len(data)
    return docs, skipped, nbytes


# ---- the metrics, from their definitions ------------------------------------------------------

def metrics(classes, clusters):
    """NMI (arithmetic mean), ARI, purity of two labelings of the same items."""
    n = len(classes)
    ct = Counter(zip(classes, clusters))
    a, b = Counter(classes), Counter(clusters)

    def entropy(c):
        return -sum(v / n * math.log(v / n) for v in c.values())

    if len(a) == len(b) == 1:
        nmi = 1.0  # both trivial: a perfect match (scikit-learn)
    else:
        mi = sum(v / n * math.log(n * v / (a[i] * b[j])) for (i, j), v in ct.items())
        den = (entropy(a) + entropy(b)) / 2
        nmi = 0.0 if mi <= 1e-15 else mi / den
    # pairs: tp same class and same cluster, fp same cluster only, fn same class only
    c2 = lambda x: x * (x - 1) // 2
    tp = sum(c2(v) for v in ct.values())
    fp = sum(c2(v) for v in b.values()) - tp
    fn = sum(c2(v) for v in a.values()) - tp
    tn = c2(n) - tp - fp - fn
    if fn == 0 and fp == 0:
        ari = 1.0
    else:
        ari = 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))
    best = Counter()
    for (i, j), v in ct.items():
        best[j] = max(best[j], v)
    purity = sum(best.values()) / n
    return {'nmi': nmi, 'ari': ari, 'purity': purity, 'labelled_documents': n, 'classes': len(a),
            'clusters': len(b)}


# ---- TF-IDF and top terms, for corpora of plain lower-case words -----------------------------

def tfidf_rows(docs):
    """Rows {term: weight} of TF-IDF as docmine's defaults define it (tf = count / the document's
    tokens, idf = ln(N / df), rows L2-normalised), for text of lower-case ASCII words read without
    stemming and stop words (docmine run with --no-stem --no-stopwords); tokens of 2..64 letters."""
    toks = [[w for w in re.findall(r'[a-z0-9]+', t) if 2 <= len(w) <= 64 and not w.isdigit()] for _, _, t in docs]
    df = Counter(w for ts in toks for w in set(ts))
    n = len(docs)
    rows = []
    for ts in toks:
        c = Counter(ts)
        r = {w: v / len(ts) * math.log(n / df[w]) for w, v in c.items()}
        norm = math.sqrt(sum(x * x for x in r.values()))
        rows.append({w: x / norm for w, x in r.items() if x > 0} if norm > 0 else {})
    return rows


def check_top_terms(rows, cl, crow, top_k):
    """clusters.tsv's terms are each cluster's heaviest by summed weight, with their sums."""
    sums = {}
    for r, c in zip(rows, cl):
        if c < 0:
            continue
        s = sums.setdefault(c, Counter())
        for w, x in r.items():
            s[w] += x
    for r in crow:
        if len(r) != 4 or int(r[0]) < 0:
            continue
        c = int(r[0])
        terms = [t.decode() for t in r[2].split(b' ')] if r[2] else []
        ws = [float(x) for x in r[3].split(b' ')] if r[3] else []
        best = sorted(sums.get(c, Counter()).values(), reverse=True)[:top_k]
        tol = lambda a, b: abs(a - b) <= 2e-5 * max(1.0, abs(b))
        check(len(ws) == len(best) and all(tol(a, b) for a, b in zip(ws, best)),
              'clusters.tsv: cluster %d: weights %s, the heaviest terms weigh %s' % (c, ws[:4], best[:4]))
        wrong = [(t, w, sums.get(c, {}).get(t)) for t, w in zip(terms, ws) if not tol(w, sums.get(c, {}).get(t, -1))]
        check(not wrong, 'clusters.tsv: cluster %d: terms with other summed weights (term, listed, recomputed): %s' %
              (c, wrong[:3]))


# ---- the output files -------------------------------------------------------------------------

def tsv_field(s):
    return s.replace(b'\t', b' ').replace(b'\n', b' ').replace(b'\r', b' ')


def read_lines(path):
    with open(path, 'rb') as f:
        data = f.read()
    check(data.endswith(b'\n'), '%s: does not end with a line break' % path)
    return data[:-1].split(b'\n') if data.endswith(b'\n') else data.split(b'\n')


def timer(rep, name, calls=None):
    """A timer over ranks: 0 <= min <= avg <= max; calls (summed over ranks) as given."""
    t = rep.get('timers_s', {}).get(name)
    if not check(t is not None, 'report.json: no timer %s' % name):
        return None
    check(0 <= t['min'] <= t['avg'] + 1e-9 and t['avg'] <= t['max'] + 1e-9 and t['calls'] >= 1,
          'timer %s: min %g avg %g max %g calls %d' % (name, t['min'], t['avg'], t['max'], t['calls']))
    if calls is not None:
        check(t['calls'] == calls, 'timer %s: %d calls, expected %d (once per rank)' % (name, t['calls'], calls))
    return t


def within(rep, name, secs, what, slack=0.02):
    t = timer(rep, name)
    if t is not None:
        check(t['min'] - slack <= secs <= t['max'] + slack,
              '%s %.6f s is outside timer %s [%.6f, %.6f] over ranks' % (what, secs, name, t['min'], t['max']))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--kind', required=True, choices=['pipeline', 'flock', 'streamclust'])
    ap.add_argument('--method', choices=['flock', 'streamclust'])
    ap.add_argument('--ranks', type=int, default=1)
    ap.add_argument('--corpus')
    ap.add_argument('--synthetic', type=int)
    ap.add_argument('--expect-empty', type=int)
    ap.add_argument('--expect-skipped', type=int)
    ap.add_argument('--iterations', type=int)
    ap.add_argument('--top-k', type=int, default=10)
    ap.add_argument('--streamclust-n', type=int, default=0, help='streamclust N (0: all documents)')
    ap.add_argument('--plain-words', action='store_true',
                    help='the corpus is plain lower-case words, run with --no-stem --no-stopwords: '
                         'recompute the top terms of clusters.tsv')
    o = ap.parse_args(argv)
    method = o.method or ('streamclust' if o.kind == 'streamclust' else 'flock')
    d = o.dir
    p = lambda n: os.path.join(d, n)

    # the expected documents
    docs, skipped, nbytes = None, 0, None
    if o.corpus:
        docs, skipped, nbytes = read_corpus(o.corpus)
        if o.synthetic is not None:  # `docmine synth`'s corpus of the run's synthetic documents
            check(len(docs) == o.synthetic, '--corpus holds %d documents, not %d' % (len(docs), o.synthetic))
            nbytes = None  # the synthetic source counts the text alone
        if o.kind == 'streamclust' and o.streamclust_n:
            docs = docs[:o.streamclust_n]
    elif o.synthetic is not None:
        docs = [(('synth-%d' % i).encode(), None, None) for i in range(o.synthetic)]

    rep = json.load(open(p('report.json'), encoding='utf-8'))
    res = rep['results']
    check(rep.get('command') == o.kind, 'report.json: command %r, expected %r' % (rep.get('command'), o.kind))
    check(rep.get('ranks') == o.ranks, 'report.json: ranks %r, expected %d' % (rep.get('ranks'), o.ranks))
    check(rep.get('backend') == 'cpu', 'report.json: backend %r' % rep.get('backend'))

    # assignments.tsv
    rows = read_lines(p('assignments.tsv'))
    sc_cmd = o.kind == 'streamclust'
    header = b'doc\tlabel\tcentre\tcentre_id\tsq_dist' if sc_cmd else b'doc\tlabel\tcluster'
    check(rows[0] == header, 'assignments.tsv: header %r' % rows[0])
    rows = [r.split(b'\t') for r in rows[1:]]
    ncol = 5 if sc_cmd else 3
    bad = [i for i, r in enumerate(rows) if len(r) != ncol]
    check(not bad, 'assignments.tsv: rows %s do not have %d columns' % (bad[:5], ncol))
    rows = [r for r in rows if len(r) == ncol]
    n = len(rows)
    ids = [r[0] for r in rows]
    labels = [r[1] for r in rows]
    try:
        cl = [int(r[2]) for r in rows]
    except ValueError:
        check(False, 'assignments.tsv: a cluster is not an integer')
        cl = [0] * n
    if docs is not None:
        check(n == len(docs), 'assignments.tsv: %d documents, the input has %d' % (n, len(docs)))
        want_ids = [tsv_field(x[0]) for x in docs]
        if ids != want_ids:
            c_got, c_want = Counter(ids), Counter(want_ids)
            missing = list((c_want - c_got).elements())[:3]
            extra = list((c_got - c_want).elements())[:3]
            first = next((i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b), min(len(ids), len(want_ids)))
            check(False, 'assignments.tsv: documents differ from the input: missing %r, extra %r, first '
                  'difference at row %d' % (missing, extra, first))
        if docs and docs[0][1] is not None:
            want_labels = [tsv_field(x[1]) for x in docs]
            check(labels == want_labels, 'assignments.tsv: labels differ from the input (first at row %d)' %
                  next((i for i, (a, b) in enumerate(zip(labels, want_labels)) if a != b), -1))
    if docs is None or o.synthetic is not None:
        check(len(set(ids)) == n, 'assignments.tsv: an id appears twice')

    # the number of clusters and the noise
    if sc_cmd:
        k = res.get('k')
    elif o.kind == 'flock':
        k = res.get('clusters')
    else:
        k = res.get('cluster', {}).get('clusters')
    check(isinstance(k, int) and k >= 0, 'report.json: clusters %r' % k)
    k = k if isinstance(k, int) else 0
    out_of_range = [c for c in cl if not (-1 <= c < k) or (c == -1 and method != 'flock')]
    check(not out_of_range, 'assignments.tsv: clusters %s outside -1..%d' % (sorted(set(out_of_range))[:5], k - 1))
    sizes = Counter(cl)
    noise = sizes.get(-1, 0)

    # clusters.tsv (flock, pipeline)
    if not sc_cmd:
        crow = read_lines(p('clusters.tsv'))
        check(crow[0] == b'cluster\tsize\ttop_terms\tweights', 'clusters.tsv: header %r' % crow[0])
        crow = [r.split(b'\t') for r in crow[1:]]
        check(all(len(r) == 4 for r in crow), 'clusters.tsv: a row without 4 columns')
        ids_c = [int(r[0]) for r in crow]
        check(ids_c == list(range(k)) + [-1], 'clusters.tsv: clusters %s, expected 0..%d then -1' % (ids_c[:8], k - 1))
        for r in crow:
            if len(r) != 4:
                continue
            c, sz = int(r[0]), int(r[1])
            check(sz == sizes.get(c, 0), 'clusters.tsv: cluster %d of size %d, assignments.tsv has %d' %
                  (c, sz, sizes.get(c, 0)))
            terms = r[2].split(b' ') if r[2] else []
            ws = [float(x) for x in r[3].split(b' ')] if r[3] else []
            check(len(terms) == len(ws) <= o.top_k, 'clusters.tsv: cluster %d: %d terms, %d weights' %
                  (c, len(terms), len(ws)))
            check(all(w > 0 for w in ws) and all(ws[i] >= ws[i + 1] for i in range(len(ws) - 1)),
                  'clusters.tsv: cluster %d: weights not positive and non-increasing: %s' % (c, ws))
            if c == -1:
                check(not terms, 'clusters.tsv: the noise row has terms')
        check(sum(int(r[1]) for r in crow if len(r) == 4) == n, 'clusters.tsv: sizes do not sum to %d' % n)
        if o.plain_words and docs is not None and len(docs) == n:
            check_top_terms(tfidf_rows(docs), cl, crow, o.top_k)
        if method == 'flock':
            # flock's clusters are numbered densely: each has members
            empty = [c for c in range(k) if sizes.get(c, 0) == 0]
            check(not empty, 'flock: clusters %s have no document' % empty[:5])

    # positions.csv (flock)
    if method == 'flock':
        with open(p('positions.csv'), newline='', encoding='utf-8', errors='surrogateescape') as f:
            pos = list(csv.reader(f))
        check(pos and pos[0] == ['doc', 'x', 'y', 'cluster', 'label'], 'positions.csv: header %r' % (pos[:1],))
        pos = pos[1:]
        check(len(pos) == n, 'positions.csv: %d rows, assignments.tsv %d' % (len(pos), n))
        enc = lambda s: s.encode('utf-8', 'surrogateescape')
        plane = (res if o.kind == 'flock' else res.get('cluster', {})).get('plane', {})
        W, H = plane.get('final_width', 0), plane.get('final_height', 0)
        outside = 0
        for i, r in enumerate(pos[:n]):
            if not check(len(r) == 5, 'positions.csv: row %d has %d columns' % (i, len(r))):
                continue
            if docs is not None and i < len(docs):
                check(enc(r[0]) == docs[i][0], 'positions.csv: row %d id %r, the input %r' % (i, r[0], docs[i][0]))
                if docs[i][1] is not None:
                    check(enc(r[4]) == docs[i][1], 'positions.csv: row %d labels %r, the input %r' %
                          (i, r[4], docs[i][1]))
            check(tsv_field(enc(r[0])) == ids[i] and int(r[3]) == cl[i] and tsv_field(enc(r[4])) == labels[i],
                  'positions.csv: row %d differs from assignments.tsv' % i)
            x, y = float(r[1]), float(r[2])
            if not (math.isfinite(x) and math.isfinite(y) and -1e-9 <= x <= W * (1 + 1e-8) and
                    -1e-9 <= y <= H * (1 + 1e-8)):
                outside += 1
        check(outside == 0, 'positions.csv: %d positions outside the final plane %g x %g' % (outside, W, H))

    # the quality, recomputed
    if docs is not None and docs and docs[0][1] is not None:
        first = [x[1].split(b',')[0] for x in docs]  # byte-exact, from the corpus
    else:
        first = [x.split(b',')[0] for x in labels]
    lab = [(f, c) for f, c in zip(first, cl) if f]
    if sc_cmd:
        q = res.get('quality')
    elif o.kind == 'flock':
        q = res.get('quality')
    else:
        q = res.get('cluster', {}).get('quality')
        check(res.get('quality') == q, 'report.json: results.quality differs from results.cluster.quality')
    if not lab:
        check(q is None, 'report.json: quality without a labelled document: %r' % q)
        if method == 'flock':
            check(not os.path.exists(p('flock-labels.png')), 'flock-labels.png without labels')
    elif check(q is not None, 'report.json: no quality, %d documents are labelled' % len(lab)):
        want = metrics([a for a, _ in lab], [b for _, b in lab])
        for key in ('nmi', 'ari', 'purity'):
            check(abs(q[key] - want[key]) <= 2e-8 + 1e-8 * abs(want[key]),
                  'quality.%s %.10g, recomputed %.10g' % (key, q[key], want[key]))
        for key in ('labelled_documents', 'classes', 'clusters'):
            check(q[key] == want[key], 'quality.%s %r, recomputed %r' % (key, q[key], want[key]))
        if method == 'flock':
            check(os.path.getsize(p('flock-labels.png')) > 0, 'no flock-labels.png with labels')

    # report.json: the command's counts and figures
    if o.kind == 'pipeline':
        check(res.get('method') == method, 'results.method %r' % res.get('method'))
        check(res.get('ranks') == o.ranks, 'results.ranks %r' % res.get('ranks'))
        tf, pre, clu, th = res['tfidf'], res['preprocess'], res['cluster'], res['throughput']
        for what, v in (('results.documents', res.get('documents')), ('tfidf.docs', tf.get('docs')),
                        ('cluster.documents', clu.get('documents'))):
            check(v == n, '%s %r, assignments.tsv has %d' % (what, v, n))
        if o.synthetic is not None:
            check(res['input'].get('documents') == o.synthetic, 'input.documents %r' % res['input'].get('documents'))
            check(close(res['input'].get('documents_per_rank', -1), o.synthetic / o.ranks),
                  'input.documents_per_rank %r' % res['input'].get('documents_per_rank'))
        if method == 'flock':
            check(clu.get('noise') == noise, 'cluster.noise %r, assignments.tsv has %d' % (clu.get('noise'), noise))
        if o.expect_empty is not None:
            check(tf.get('empty_docs') == o.expect_empty, 'tfidf.empty_docs %r, expected %d' %
                  (tf.get('empty_docs'), o.expect_empty))
        sk = sum(pre['skipped'].values())
        check(tf.get('docs_skipped') == sk, 'tfidf.docs_skipped %r, the skips sum to %d' % (tf.get('docs_skipped'), sk))
        if o.corpus:
            want_sk = o.expect_skipped if o.expect_skipped is not None else skipped
            check(sk == want_sk, 'preprocess: %d records skipped, expected %d' % (sk, want_sk))
        # timers and the figures that name them
        for name in ('pipeline.preprocess', 'pipeline.tfidf', 'pipeline.cluster', 'pipeline.total'):
            timer(rep, name, o.ranks)
        if nbytes is not None:
            check(tf.get('bytes_read') == nbytes, 'tfidf.bytes_read %r, the corpus has %d bytes of text' %
                  (tf.get('bytes_read'), nbytes))
        within(rep, 'pipeline.preprocess', pre['seconds'], 'preprocess.seconds')
        within(rep, 'pipeline.tfidf', tf['seconds'], 'tfidf.seconds')
        within(rep, 'pipeline.cluster', clu['seconds'], 'cluster.seconds')
        within(rep, 'pipeline.total', th['seconds'], 'throughput.seconds')
        check(pre['seconds'] + tf['seconds'] + clu['seconds'] <= th['seconds'] + 1e-6,
              'the stages take %.6f s, more than the run %.6f s' % (pre['seconds'] + tf['seconds'] + clu['seconds'],
                                                                   th['seconds']))
        s = th['seconds']
        if check(s > 0, 'throughput.seconds %r' % s):
            check(close(th['documents_per_second'], n / s), 'documents_per_second %r, %d documents / %r s = %r' %
                  (th['documents_per_second'], n, s, n / s))
            check(close(th['documents_per_second_per_rank'], n / s / o.ranks),
                  'documents_per_second_per_rank %r, expected %r' % (th['documents_per_second_per_rank'],
                                                                      n / s / o.ranks))
            check(close(th['text_bytes_per_second'], tf['bytes_read'] / s),
                  'text_bytes_per_second %r, %d bytes / %r s = %r' % (th['text_bytes_per_second'], tf['bytes_read'],
                                                                     s, tf['bytes_read'] / s))
        names = ['assignments.tsv', 'clusters.tsv'] + (
            ['positions.csv', 'flock.png'] + (['flock-labels.png'] if lab else []) if method == 'flock' else [])
        check(res.get('outputs') == names + ['report.json'], 'results.outputs %r, expected %r' %
              (res.get('outputs'), names + ['report.json']))
        for f in names:
            check(os.path.exists(p(f)) and os.path.getsize(p(f)) > 0, '%s missing' % f)
        if method == 'streamclust':
            timer(rep, 'streamclust.total', o.ranks)
            check(clu.get('config', {}).get('kmin', 0) <= k <= clu.get('config', {}).get('kmax', -1),
                  'streamclust: %d clusters outside KMIN..KMAX' % k)
    if method == 'flock':
        fr = res if o.kind == 'flock' else res['cluster']
        if o.kind == 'flock':
            check(fr.get('documents') == n, 'results.documents %r, assignments.tsv has %d' % (fr.get('documents'), n))
            check(fr.get('noise') == noise, 'results.noise %r, assignments.tsv has %d' % (fr.get('noise'), noise))
        if o.iterations is not None:
            check(fr.get('iterations') == o.iterations, 'iterations %r' % fr.get('iterations'))
        check(fr.get('iterations_run') == fr.get('iterations'), 'iterations_run %r of %r' %
              (fr.get('iterations_run'), fr.get('iterations')))
        check(fr.get('plane', {}).get('slices') == o.ranks, 'plane.slices %r' % fr.get('plane', {}).get('slices'))
        timer(rep, 'flock.run', o.ranks)
        rs = fr.get('run_seconds', 0)
        within(rep, 'flock.run', rs, 'run_seconds')
        if check(rs > 0, 'run_seconds %r' % rs):
            want = n * fr['iterations_run'] / rs
            check(close(fr['boid_iterations_per_second'], want), 'boid_iterations_per_second %r, %d x %d / %r = %r' %
                  (fr['boid_iterations_per_second'], n, fr['iterations_run'], rs, want))
    if sc_cmd:
        cfg = res.get('config', {})
        check(cfg.get('n') == n, 'config.n %r, assignments.tsv has %d' % (cfg.get('n'), n))
        check(cfg.get('kmin', 0) <= k <= cfg.get('kmax', -1), 'k %d outside KMIN..KMAX' % k)
        timer(rep, 'streamclust.total', o.ranks)
        # centers.txt: id, weight, coordinates, blank line per centre
        blocks = open(p('centers.txt'), 'rb').read().split(b'\n\n')
        blocks = [b.strip(b'\n').split(b'\n') for b in blocks if b.strip(b'\n')]
        check(len(blocks) == k, 'centers.txt: %d centres, report k %d' % (len(blocks), k))
        cid = [int(b[0]) for b in blocks]
        wsum = sum(float(b[1]) for b in blocks)
        check(abs(wsum - n) < 1e-3, 'centers.txt: weights sum to %g, %d points' % (wsum, n))
        check(all(len(b[2].split()) == cfg.get('dim') for b in blocks), 'centers.txt: coordinates not of DIM')
        bad = [i for i, r in enumerate(rows) if 0 <= cl[i] < k and int(r[3]) != cid[cl[i]]]
        check(not bad, 'assignments.tsv: centre_id differs from centers.txt at rows %s' % bad[:5])
        dist = [float(r[4]) for r in rows]
        check(all(x >= 0 and math.isfinite(x) for x in dist), 'assignments.tsv: a negative or non-finite sq_dist')
        check(close(sum(dist), res.get('total_cost', -1), rel=1e-4),
              'total_cost %r, the squared distances sum to %r' % (res.get('total_cost'), sum(dist)))

    if ERRS:
        for e in ERRS:
            print('FAIL %s: %s' % (d, e))
        return 1
    print('ok: %d checks' % N_CHECKS[0])
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:  # a missing or malformed file
        print('FAIL %s: %s: %s' % (sys.argv[1] if len(sys.argv) > 1 else '?', type(e).__name__, e))
        sys.exit(1)
