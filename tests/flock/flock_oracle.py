#!/usr/bin/env python3
"""An independent oracle of flock's dynamics (pure Python, no numpy), and its comparison with
docmine's CPU backend.

The model is written from the documentation only: DESIGN.md section 7 ("Multi-species flocking"),
flock/flock_model.h (the arithmetic: fixed-point force sums, the cosine slack, the update),
flock/flock.h (the options: plane area N pi r^2 / neighbours, shrink schedule, v_max, min_dist)
and common/rng.h (Philox4x32-10 keyed by (seed, document)). Where the documentation is silent the
code was read, and only for these (each marked "CODE:" below):
  - the initial velocity (flock.c initial_state: direction 2 pi u2, speed v_max/2 u3, counters 0..3),
  - the grid's cell count (flock.c dm_flock_params_at: floor(side / (r (1 + 1e-9))), >= 3 a side),
  - the plane of the step after the last (flock.c: the last iteration's next plane is its own),
  - unit rows (flock.c unit_row: float(weight / double norm), zero rows stay zero),
  - min_dist's default (0.05, DM_FLOCK_OPTIONS_INIT; not on the command line),
  - the checkpoint and .dmv layouts (flock_checkpoint.c, tfidf/tfidf.h).
Neighbours are found by brute force over every pair on the torus (d^2 < r^2, minimum image); a
uniform grid (cell >= r, 3x3 scan) is implemented too and checked against brute force. There is
no neighbour limit in the model (--neighbours only sets the plane's area) and the pair cache
(flock_cpu.c) may only change speed, so the oracle has neither: every pair's cosine is exact.

Usage: flock_oracle.py selftest
       flock_oracle.py check DOCMINE MPIEXEC WORKDIR      (what tests/flock/test_flock_oracle.sh runs)
"""
import math
import os
import random
import struct
import subprocess
import sys
import zlib

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

# ---- common/rng.h: Philox4x32-10 -------------------------------------------------------------


def philox4x32_10(ctr, k0, k1):
    c0, c1, c2, c3 = ctr
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        hi0, lo0 = p0 >> 32, p0 & M32
        hi1, lo1 = p1 >> 32, p1 & M32
        c0, c1, c2, c3 = (hi1 ^ c1 ^ k0) & M32, lo1, (hi0 ^ c3 ^ k1) & M32, lo0
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return (c0, c1, c2, c3)


def rng_u64(seed, doc, counter):
    r = philox4x32_10((counter & M32, counter >> 32 & M32, doc & M32, doc >> 32 & M32), seed & M32,
                      seed >> 32 & M32)
    return (r[1] << 32) | r[0]


def rng_uniform(seed, doc, counter):
    return float(rng_u64(seed, doc, counter) >> 11) * (1.0 / 9007199254740992.0)


# ---- flock_model.h's arithmetic --------------------------------------------------------------

FIX_SCALE = 4294967296.0
FIX_INV = 1.0 / 4294967296.0
FIX_MAX = 1073741824.0
DOT_SCALE = 2305843009213693952.0
DOT_INV = 1.0 / 2305843009213693952.0
COS_SLACK = 1.0 / 1048576.0
CELL_SLACK = 1e-9  # CODE: flock.c


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def rint(v):
    return int(round(v))  # round half to even, as llrint in the default rounding mode


def fix(v):
    if v > FIX_MAX:
        v = FIX_MAX
    if v < -FIX_MAX:
        v = -FIX_MAX
    return rint(v * FIX_SCALE)


def unfix(i):
    i &= M64  # sums wrap modulo 2^64 (dm_flock_sum)
    if i >= 1 << 63:
        i -= 1 << 64
    return float(i) * FIX_INV


def min_image(d, L, half):
    if d > half:
        return d - L
    if d < -half:
        return d + L
    return d


def wrap(v, L):
    if v >= L:
        v -= L
    elif v < 0.0:
        v += L
    if v >= L or v < 0.0:
        v = 0.0
    return v


class Options:
    def __init__(self, iterations=500, radius=1.0, neighbours=15.0, threshold=0.10,
                 weights=(0.02, 0.05, 0.30, 0.05), vmax=0.5, shrink=0.5, seed=42, min_dist=0.05):
        self.iterations = iterations
        self.radius = radius
        self.neighbours = neighbours
        self.threshold = threshold
        self.w_sep, self.w_dis, self.w_ali, self.w_coh = weights
        self.vmax = vmax
        self.shrink = shrink
        self.seed = seed
        self.min_dist = min_dist

    def cli(self):
        return ['--iterations', str(self.iterations), '--radius', repr(self.radius), '--neighbours',
                repr(self.neighbours), '--threshold', repr(self.threshold), '--weights',
                '%r,%r,%r,%r' % (self.w_sep, self.w_dis, self.w_ali, self.w_coh), '--vmax', repr(self.vmax),
                '--shrink', repr(self.shrink), '--seed', str(self.seed)]


def side0(n, o):
    # flock.h: a square plane of area N pi r^2 / neighbours
    return math.sqrt(float(n) * 3.141592653589793 * o.radius * o.radius / o.neighbours)


def side_at(n, o, t):
    # flock.h: side(t) = side(0) (1 - shrink t / iterations)
    return side0(n, o) * (1.0 - o.shrink * (float(t) / float(o.iterations)))


class Params:
    pass


def params_at(n, o, t):
    p = Params()
    p.r = o.radius
    p.r2 = o.radius * o.radius
    p.dmin2 = (o.min_dist * o.radius) * (o.min_dist * o.radius)
    p.W = p.H = side_at(n, o, t)
    tn = t + 1 if t < o.iterations else t  # CODE: flock.c
    p.W1 = p.H1 = side_at(n, o, tn)
    p.half = 0.5 * p.W
    p.ratio = p.W1 / p.W
    cmin = o.radius * (1.0 + CELL_SLACK)
    p.C = int(math.floor(p.W / cmin))  # CODE: flock.c
    p.cw = p.W / p.C if p.C > 0 else 0.0
    return p


def plane_ok(n, o):
    """Whether every iteration's plane holds 3 x 3 cells of side >= r (the docs' grid)."""
    return params_at(n, o, o.iterations).C >= 3 and params_at(n, o, 0).C >= 3


def unit_rows(rows):
    out = []
    for cols, vals in rows:
        ss = 0.0
        for v in vals:
            ss += v * v
        norm = math.sqrt(ss)
        out.append((list(cols), [f32(v / norm) if norm > 0 else 0.0 for v in vals]))
    return out


def dot_fix(a, b):
    ca, va = a
    cb, vb = b
    i = j = 0
    s = 0
    while i < len(ca) and j < len(cb):
        if ca[i] < cb[j]:
            i += 1
        elif ca[i] > cb[j]:
            j += 1
        else:
            s += rint(va[i] * vb[j] * DOT_SCALE)
            i += 1
            j += 1
    return s


def similarity_matrix(urows, threshold):
    """sim[i][j]: cosine of i and j >= T (less flock_model.h's 2^-20 slack). Exact, every pair."""
    n = len(urows)
    sim = [[False] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            d = dot_fix(urows[i], urows[j])
            s = float(d) * DOT_INV >= threshold - COS_SLACK
            sim[i][j] = sim[j][i] = s
    return sim


def initial_state(n, o):
    W = side_at(n, o, 0)
    st = []
    for d in range(n):
        x = W * rng_uniform(o.seed, d, 0)
        y = W * rng_uniform(o.seed, d, 1)
        a = 6.283185307179586 * rng_uniform(o.seed, d, 2)  # CODE: flock.c initial_state
        sp = 0.5 * o.vmax * rng_uniform(o.seed, d, 3)
        st.append((x, y, sp * math.cos(a), sp * math.sin(a)))
    return st


def neighbours_brute(state, p):
    """Ordered pairs (x, i, dx, dy, d2) with i != x within r on the torus, by brute force."""
    n = len(state)
    out = [[] for _ in range(n)]
    for a in range(n):
        xa, ya = state[a][0], state[a][1]
        lst = out[a]
        for b in range(n):
            if b == a:
                continue
            dx = min_image(state[b][0] - xa, p.W, p.half)
            dy = min_image(state[b][1] - ya, p.H, p.half)
            d2 = dx * dx + dy * dy
            if d2 < p.r2:
                lst.append((b, dx, dy, d2))
    return out


def cell_of(v, cs, n):
    c = int(v / cs)
    return min(max(c, 0), n - 1)


def neighbours_grid(state, p):
    """The same pairs through DESIGN.md's uniform grid (cells >= r, every boid scans its 3x3)."""
    C = p.C
    cells = {}
    for b, s in enumerate(state):
        cells.setdefault((cell_of(s[1], p.cw, C), cell_of(s[0], p.cw, C)), []).append(b)
    out = [[] for _ in range(len(state))]
    for a, s in enumerate(state):
        row, col = cell_of(s[1], p.cw, C), cell_of(s[0], p.cw, C)
        seen = set()
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                key = ((row + dr) % C, (col + dc) % C)
                if key in seen:
                    continue
                seen.add(key)
                for b in cells.get(key, ()):
                    if b == a:
                        continue
                    dx = min_image(state[b][0] - s[0], p.W, p.half)
                    dy = min_image(state[b][1] - s[1], p.H, p.half)
                    d2 = dx * dx + dy * dy
                    if d2 < p.r2:
                        out[a].append((b, dx, dy, d2))
    return out


def step(state, sim, n, o, t, o_weights=None, grid=False):
    """One iteration t -> t + 1 (synchronous: every force from the state before the step)."""
    p = params_at(n, o, t)
    nb = neighbours_grid(state, p) if grid else neighbours_brute(state, p)
    new = []
    for a, (x, y, vx, vy) in enumerate(state):
        ss = [0, 0]
        sd = [0, 0]
        vel = [0, 0]
        off = [0, 0]
        ns = 0
        for b, dx, dy, d2 in nb[a]:
            d2c = d2 if d2 > p.dmin2 else p.dmin2
            sx, sy = fix(-dx / d2c), fix(-dy / d2c)
            if sim[a][b]:
                ss[0] += sx
                ss[1] += sy
                vel[0] += fix(state[b][2])
                vel[1] += fix(state[b][3])
                off[0] += fix(dx)
                off[1] += fix(dy)
                ns += 1
            else:
                sd[0] += sx
                sd[1] += sy
        fx = o.w_sep * unfix(ss[0]) + o.w_dis * unfix(sd[0])
        fy = o.w_sep * unfix(ss[1]) + o.w_dis * unfix(sd[1])
        if ns > 0:
            inv = 1.0 / float(ns)
            fx += o.w_ali * (unfix(vel[0]) * inv - vx) + o.w_coh * (unfix(off[0]) * inv)
            fy += o.w_ali * (unfix(vel[1]) * inv - vy) + o.w_coh * (unfix(off[1]) * inv)
        nvx, nvy = vx + fx, vy + fy
        s2 = nvx * nvx + nvy * nvy
        if s2 > o.vmax * o.vmax:
            f = o.vmax / math.sqrt(s2)
            nvx *= f
            nvy *= f
        nx, ny = (x + nvx) * p.ratio, (y + nvy) * p.ratio
        new.append((wrap(nx, p.W1), wrap(ny, p.H1), nvx, nvy))
    return new, nb


def step_float(state, urows, n, o, t):
    """The documented model in plain double arithmetic (no fixed point, no slack, naive sums):
    within a tolerance of the exact model wherever no cosine is within 2^-20 of T."""
    p = params_at(n, o, t)
    nb = neighbours_brute(state, p)
    new = []
    for a, (x, y, vx, vy) in enumerate(state):
        F = [0.0, 0.0]
        mv = [0.0, 0.0]
        mp = [0.0, 0.0]
        ns = 0
        for b, dx, dy, d2 in nb[a]:
            ca, va = urows[a]
            cb, vb = urows[b]
            dd = dict(zip(cb, vb))
            cosv = sum(v * dd.get(c, 0.0) for c, v in zip(ca, va))
            w = max(d2, p.dmin2)
            if cosv >= o.threshold:
                F[0] += o.w_sep * -dx / w
                F[1] += o.w_sep * -dy / w
                mv[0] += state[b][2]
                mv[1] += state[b][3]
                mp[0] += dx
                mp[1] += dy
                ns += 1
            else:
                F[0] += o.w_dis * -dx / w
                F[1] += o.w_dis * -dy / w
        if ns:
            F[0] += o.w_ali * (mv[0] / ns - vx) + o.w_coh * mp[0] / ns
            F[1] += o.w_ali * (mv[1] / ns - vy) + o.w_coh * mp[1] / ns
        nvx, nvy = vx + F[0], vy + F[1]
        sp = math.hypot(nvx, nvy)
        if sp > o.vmax:
            nvx, nvy = nvx * o.vmax / sp, nvy * o.vmax / sp
        new.append(((x + nvx) * p.ratio % p.W1, (y + nvy) * p.ratio % p.H1, nvx, nvy))
    return new


# ---- files -------------------------------------------------------------------------------------


def write_dmv(path, rows, ids, labels=None):
    """tfidf/tfidf.h's .dmv layout. rows: (cols sorted, float weights)."""
    n = len(rows)
    ncols = 1 + max([c for cols, _ in rows for c in cols] + [0])
    nnz = sum(len(c) for c, _ in rows)
    labels = labels or [''] * n
    idb = b''.join(i.encode() + b'\0' for i in ids)
    lab = b''.join(lb.encode() + b'\0' for lb in labels)
    head = b'DMVECS\0\1' + struct.pack('<II5Q', 1, 1, n, ncols, nnz, len(idb), len(lab))
    head += struct.pack('<II', zlib.crc32(head) & M32, 0)
    body = bytearray(head)
    off = [0]
    for c, _ in rows:
        off.append(off[-1] + len(c))
    body += struct.pack('<%dQ' % (n + 1), *off)
    body += struct.pack('<%dI' % nnz, *[c for cols, _ in rows for c in cols])
    body += struct.pack('<%df' % nnz, *[v for _, vals in rows for v in vals])
    o = [0]
    for i in ids:
        o.append(o[-1] + len(i.encode()) + 1)
    body += struct.pack('<%dQ' % (n + 1), *o) + idb
    o = [0]
    for lb in labels:
        o.append(o[-1] + len(lb.encode()) + 1)
    body += struct.pack('<%dQ' % (n + 1), *o) + lab
    body += struct.pack('<I', zlib.crc32(bytes(body)) & M32) + b'END\n'
    with open(path, 'wb') as f:
        f.write(body)


def read_dmv(path):
    b = open(path, 'rb').read()
    assert b[:8] == b'DMVECS\0\1', path
    n, ncols, nnz, idbytes, labbytes = struct.unpack_from('<5Q', b, 16)
    pos = 64
    off = struct.unpack_from('<%dQ' % (n + 1), b, pos)
    pos += 8 * (n + 1)
    cols = struct.unpack_from('<%dI' % nnz, b, pos)
    pos += 4 * nnz
    vals = struct.unpack_from('<%df' % nnz, b, pos)
    return [(list(cols[off[r]:off[r + 1]]), list(vals[off[r]:off[r + 1]])) for r in range(n)]


CK_HEADER = 136


def read_ckpt(path):
    b = open(path, 'rb').read()
    assert b[:8] == b'DMFLOCK\1', path
    docs, _seed, it = struct.unpack_from('<QQq', b, 16)
    assert zlib.crc32(b[:-8]) & M32 == struct.unpack_from('<I', b, len(b) - 8)[0], path + ': CRC'
    st = [struct.unpack_from('<4d', b, CK_HEADER + 32 * d) for d in range(docs)]
    return it, st, b


def write_ckpt(path, template, it, state):
    """A checkpoint of docmine's layout at iteration it from a real one's header (its options and
    input fingerprint), with the given state."""
    head = bytearray(template[:CK_HEADER])
    struct.pack_into('<q', head, 32, it)
    body = bytes(head) + b''.join(struct.pack('<4d', *s) for s in state)
    body += struct.pack('<II', zlib.crc32(body) & M32, 0)
    with open(path, 'wb') as f:
        f.write(body)


def read_positions(path):
    out = []
    with open(path) as f:
        next(f)
        for line in f:
            parts = line.rstrip('\n').split(',')
            out.append((float(parts[1]), float(parts[2])))
    return out


# ---- self test ---------------------------------------------------------------------------------


def selftest():
    # Random123's known-answer vectors of Philox4x32-10
    assert philox4x32_10((0, 0, 0, 0), 0, 0) == (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)
    assert philox4x32_10((M32,) * 4, M32, M32) == (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)
    assert philox4x32_10((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), 0xa4093822, 0x299f31d0) == \
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)
    # fixed point rounds half to even, and wraps modulo 2^64
    assert rint(2.5) == 2 and rint(-2.5) == -2 and rint(3.5) == 4
    assert unfix((1 << 64) - (1 << 32)) == -1.0
    # the grid finds the pairs brute force finds, on random and on edge-placed boids
    o = Options(iterations=3, shrink=0.3)
    n = 60
    p = params_at(n, o, 0)
    rnd = random.Random(1)
    st = [(rnd.random() * p.W, rnd.random() * p.W, 0.0, 0.0) for _ in range(n // 2)]
    st += [(k % p.C * p.cw, (k // p.C) % p.C * p.cw, 0.0, 0.0) for k in range(n // 2)]
    a = [sorted(x) for x in neighbours_brute(st, p)]
    b = [sorted(x) for x in neighbours_grid(st, p)]
    assert a == b
    print('selftest: ok')


# ---- the comparison with docmine ---------------------------------------------------------------

TOL = 1e-9  # plane units: the oracle evaluates the same IEEE double operations, so 0 is expected


class Checker:
    def __init__(self, dm, mpiexec, work):
        self.dm, self.mpiexec, self.work = dm, mpiexec, work
        self.failures = []
        self.checks = 0
        self.worst = 0.0
        self.env = dict(os.environ, OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '2'))

    def fail(self, msg):
        print('FAIL: ' + msg)
        self.failures.append(msg)

    def docmine(self, args, ranks=1, env=None, expect=0):
        cmd = [self.dm, 'flock', '--backend', 'cpu', '--quiet'] + args
        if ranks > 1:
            cmd = [self.mpiexec, '-n', str(ranks)] + cmd
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if expect is not None and r.returncode != expect:
            self.fail('%s: exit %d, expected %d: %s' % (' '.join(cmd), r.returncode, expect, r.stderr.strip()))
            return None
        return r

    def compare(self, name, got, want, tol=TOL, velocities=True):
        self.checks += 1
        if len(got) != len(want):
            self.fail('%s: %d boids, oracle %d' % (name, len(got), len(want)))
            return False
        worst, at = 0.0, -1
        for d, (g, w) in enumerate(zip(got, want)):
            k = 4 if velocities else 2
            for c in range(k):
                e = abs(g[c] - w[c])
                if not (e <= worst):
                    worst, at = e, d
        self.worst = max(self.worst, worst if worst == worst else float('inf'))
        if os.environ.get('FLOCK_ORACLE_VERBOSE'):
            print('  %-45s %d boids, largest difference %.3g (boid %d)' % (name, len(want), worst, at))
        if not (worst <= tol):
            self.fail('%s: boid %d differs by %.3g (tolerance %.1g): docmine %r, oracle %r' %
                      (name, at, worst, tol, tuple(got[at]), tuple(want[at])))
            return False
        return True

    def counters(self, name, report, pairs, similar):
        """flock.pairs / flock.similar_pairs of report.json (ordered pairs within r, summed over the
        iterations and ranks) against the oracle's."""
        import json
        c = json.load(open(report))['counters']
        got = (c.get('flock.pairs', {}).get('sum', 0), c.get('flock.similar_pairs', {}).get('sum', 0))
        self.checks += 1
        if got != (pairs, similar):
            self.fail('%s: report counts %d pairs within r, %d similar; the oracle %d, %d' %
                      ((name,) + got + (pairs, similar)))

    def run_from_start(self, name, dmv, rows, o, ranks=1, env=None, extra=()):
        """docmine from its initial state for o.iterations, against the oracle: final checkpoint
        (x, y, vx, vy) and positions.csv."""
        out = os.path.join(self.work, name)
        os.makedirs(out, exist_ok=True)
        rep = os.path.join(out, 'report.json')
        r = self.docmine(['--vectors', dmv, '-o', out, '--checkpoint-every', str(o.iterations), '--report', rep] +
                         o.cli() + list(extra), ranks=ranks, env=env)
        if r is None:
            return None
        n = len(rows)
        urows = unit_rows(rows)
        sim = similarity_matrix(urows, o.threshold)
        st = initial_state(n, o)
        pairs = similar = 0
        for t in range(o.iterations):
            st, nb = step(st, sim, n, o, t)
            pairs, similar = pairs + sum(map(len, nb)), similar + sum(sim[a][e[0]] for a, l in enumerate(nb) for e in l)
        self.counters(name, rep, pairs, similar)
        it, got, _ = read_ckpt(os.path.join(out, 'flock.ckpt'))
        if it != o.iterations:
            self.fail('%s: checkpoint at iteration %d, expected %d' % (name, it, o.iterations))
        self.compare(name + ' (checkpoint)', got, st)
        self.compare(name + ' (positions.csv)', read_positions(os.path.join(out, 'positions.csv')), st,
                     velocities=False)
        return st

    def template(self, name, dmv, o):
        """A real checkpoint of this input and these options (for its header)."""
        out = os.path.join(self.work, name + '-tpl')
        os.makedirs(out, exist_ok=True)
        if self.docmine(['--vectors', dmv, '-o', out, '--checkpoint-every', str(o.iterations)] + o.cli()) is None:
            return None
        return read_ckpt(os.path.join(out, 'flock.ckpt'))[2]

    def run_resumed(self, name, dmv, rows, o, it, state, tpl, env=None, ranks=1, check_grid=True, extra=()):
        """docmine resumed from a crafted checkpoint at iteration it (state on that iteration's
        plane) to o.iterations, against the oracle from the same state."""
        out = os.path.join(self.work, name)
        os.makedirs(out, exist_ok=True)
        ck = os.path.join(out, 'flock.ckpt')
        write_ckpt(ck, tpl, it, state)
        rep = os.path.join(out, 'report.json')
        r = self.docmine(['--vectors', dmv, '-o', out, '--checkpoint-every', '1', '--resume', '--report', rep] +
                         o.cli() + list(extra), ranks=ranks, env=env)
        if r is None:
            return None
        n = len(rows)
        sim = similarity_matrix(unit_rows(rows), o.threshold)
        st = list(state)
        pairs = similar = 0
        for t in range(it, o.iterations):
            if check_grid:
                p = params_at(n, o, t)
                a = [sorted(x) for x in neighbours_brute(st, p)]
                b = [sorted(x) for x in neighbours_grid(st, p)]
                if a != b:
                    self.fail('%s: the oracle\'s grid misses pairs at iteration %d' % (name, t))
            st, nb = step(st, sim, n, o, t)
            pairs, similar = pairs + sum(map(len, nb)), similar + sum(sim[a][e[0]] for a, l in enumerate(nb) for e in l)
        self.counters(name, rep, pairs, similar)
        got = read_ckpt(ck)[1]
        self.compare(name, got, st)
        return st


def topic_rows(n, topics, terms_per_topic, words, seed):
    """Sparse rows from a few topics (documents of a topic share most terms)."""
    rnd = random.Random(seed)
    rows = []
    for d in range(n):
        k = d % topics
        counts = {}
        for _ in range(words):
            if rnd.random() < 0.3:
                t = rnd.randrange(10)  # shared background terms
            else:
                t = 10 + k * terms_per_topic + min(int(rnd.expovariate(0.15)), terms_per_topic - 1)
            counts[t] = counts.get(t, 0) + 1
        cols = sorted(counts)
        rows.append((cols, [f32(counts[c] / words) for c in cols]))
    return rows


def crafted_state(n, o, it):
    """Boids of iteration it's plane on cell edges and corners, on the torus seam and across it,
    at exactly r and just within, coincident and all but coincident, on the edges of 2 and 3
    slices, some at and above the speed cap."""
    p = params_at(n, o, it)
    W, cw, r = p.W, p.cw, o.radius

    def below(v):
        return math.nextafter(v, -math.inf)

    edges = [0.5 * W, below(0.5 * W), (1.0 / 3.0) * W, below((1.0 / 3.0) * W), (2.0 / 3.0) * W,
             below((2.0 / 3.0) * W)]
    st = []
    for d in range(n):
        k, g = d % 16, d // 16
        if k == 0:
            s = (0.0, 0.0)                    # the origin: the seam in x and y
        elif k == 1:
            s = (below(W), below(W))          # the last representable point before the seam
        elif k == 2:
            s = (cw, 2 * cw)                  # a cell corner
        elif k == 3:
            s = (below(cw), below(2 * cw))    # just before it
        elif k == 4:
            s = (cw + r, 2 * cw)              # exactly r from k == 2 (not a neighbour)
        elif k == 5:
            s = (below(cw + r), 2 * cw)       # just within r
        elif k == 6:
            s = (0.0, 3 * cw % W)             # on the seam
        elif k == 7:
            s = (below(W) - 0.5 * r, 3 * cw % W)  # across the seam from k == 6
        elif k in (8, 9):
            s = (2 * cw, 2 * cw)              # coincident
        elif k == 10:
            s = (2 * cw + 1e-12, 2 * cw)      # all but coincident (the softening)
        elif k in (11, 12, 13):
            s = ((d * 0.37 * cw) % W, edges[(d + k) % len(edges)])  # on or next to a slice edge
        else:
            s = ((d * 0.37 * cw) % W, (d * 0.61 * cw) % W)
        if g and k <= 10:  # spread the groups of 16 over the plane by whole cells
            s = ((s[0] + g * 3 * cw) % W, (s[1] + g * 5 * cw) % W)
        s = tuple(v if v < W else 0.0 for v in s)
        ang = d * 0.7
        sp = o.vmax * (0.25 * (d % 5))        # some at and above the cap
        st.append((s[0], s[1], sp * math.cos(ang), sp * math.sin(ang)))
    st[1] = (st[1][0], st[1][1], 0.3 * r, 0.3 * r)  # into the seam
    return st


def check(dm, mpiexec, work):
    c = Checker(dm, mpiexec, work)

    # 1. topic vectors written here (a mix of similar and dissimilar pairs), from the RNG's start
    n = 150
    rows = topic_rows(n, 4, 30, 40, 7)
    dmv = os.path.join(work, 'topics.dmv')
    write_dmv(dmv, rows, ['t%d' % d for d in range(n)])
    for iters in (1, 2, 5, 10):
        o = Options(iterations=iters, threshold=0.3, shrink=0.3, seed=11)
        c.run_from_start('topics-it%d' % iters, dmv, rows, o)
    o10 = Options(iterations=10, threshold=0.3, shrink=0.3, seed=11)
    # the pair cache off, and two ranks: the same trajectories
    c.run_from_start('topics-nocache', dmv, rows, o10, env={'DOCMINE_FLOCK_CPU_CACHE': '0'})
    c.run_from_start('topics-np2', dmv, rows, o10, ranks=2, env={'OMP_NUM_THREADS': '1'})
    # strong weights: most boids at the speed cap, many close pairs (the softening)
    ostrong = Options(iterations=5, threshold=0.3, shrink=0.2, seed=3, weights=(0.5, 2.0, 0.9, 0.8), vmax=0.9,
                      neighbours=20.0)
    c.run_from_start('topics-strong', dmv, rows, ostrong)

    # 2. a vectorised hand-made corpus (duplicates, an empty document), through docmine vectorize
    corpus = os.path.join(work, 'corpus.tsv')
    words = ['apple', 'banana', 'cherry', 'grape', 'melon', 'zebra', 'yak', 'walrus', 'otter', 'heron',
             'copper', 'silver', 'nickel', 'cobalt', 'zinc']
    rnd = random.Random(5)
    with open(corpus, 'w') as f:
        for d in range(60):
            g = d % 3
            txt = ' '.join(rnd.choice(words[5 * g:5 * g + 5]) for _ in range(8))
            if d % 17 == 0:
                txt = 'the and of'  # empty after stop words
            if d % 13 == 1:
                txt = 'apple banana cherry'  # identical documents
            f.write('d%d\tg%d\t%s\n' % (d, g, txt))
    vdmv = os.path.join(work, 'corpus.dmv')
    r = subprocess.run([dm, 'vectorize', '--backend', 'cpu', '--quiet', '--corpus', corpus, '-o', vdmv],
                       env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        c.fail('vectorize: ' + r.stderr)
    else:
        vrows = read_dmv(vdmv)
        for iters in (1, 2, 5, 10):
            c.run_from_start('corpus-it%d' % iters, vdmv, vrows,
                             Options(iterations=iters, threshold=0.2, shrink=0.1, neighbours=4.0, seed=2))

    # 3. crafted states, one or a few steps from a checkpoint: cell edges, the seam, coincident
    #    boids, pairs at exactly r, identical and empty documents
    n = 64
    base = topic_rows(48, 3, 10, 12, 9)
    rows = base + [base[0]] * 6 + [([], [])] * 6 + [base[1]] * 4  # identical, empty, identical
    dmv = os.path.join(work, 'crafted.dmv')
    write_dmv(dmv, rows, ['c%d' % d for d in range(n)])
    for T, thr in ((1.0, 'identical'), (0.25, 'topics'), (0.0, 'zero-T'), (-1.0, 'all-similar')):
        o = Options(iterations=4, threshold=T, shrink=0.4, neighbours=6.0, seed=1, vmax=0.7,
                    weights=(0.3, 0.6, 0.5, 0.4))
        tpl = c.template('crafted-%s' % thr, dmv, o)
        if tpl is None:
            continue
        for it in (0, 3):
            st = crafted_state(n, o, it)
            c.run_resumed('crafted-%s-from%d' % (thr, it), dmv, rows, o, it, st, tpl)
            c.run_resumed('crafted-%s-from%d-nocache' % (thr, it), dmv, rows, o, it, st, tpl,
                          env={'DOCMINE_FLOCK_CPU_CACHE': '0'})
            if thr == 'topics':
                # slices: 2 and 3 ranks, boids on and next to the slices' edges and the seam
                for P in (2, 3):
                    c.run_resumed('crafted-%s-from%d-np%d' % (thr, it, P), dmv, rows, o, it, st, tpl, ranks=P,
                                  env={'OMP_NUM_THREADS': '1'})

    # 3b. longer runs across ranks with the pair cache on: boids migrate between slices (their
    #     cache rows follow them), every K-th iteration with --migrate-every K
    n = 300
    rows = topic_rows(n, 4, 30, 40, 8)
    dmv = os.path.join(work, 'topics300.dmv')
    write_dmv(dmv, rows, ['u%d' % d for d in range(n)])
    o = Options(iterations=30, threshold=0.3, shrink=0.3, seed=(1 << 40) + 5, vmax=0.3)  # a seed above 2^32
    c.run_from_start('topics-np2-it30', dmv, rows, o, ranks=2, env={'OMP_NUM_THREADS': '1'},
                     extra=('--migrate-every', '3'))
    # another radius: every length scales with r
    for rad, vm in ((2.5, 2.0), (1e-3, 4e-4)):
        o = Options(iterations=5, threshold=0.3, shrink=0.3, seed=12, radius=rad, vmax=vm,
                    weights=(0.3 * rad, 0.6 * rad, 0.5, 0.4))
        c.run_from_start('topics-r%g' % rad, dmv, rows, o)

    # 4. the smallest plane: 3 x 3 cells of side just above r at the last iteration
    o = Options(iterations=3, shrink=0.0, neighbours=15.0, seed=4, threshold=0.25)
    n = 43  # sqrt(43 pi / 15) = 3.0014 radii
    assert params_at(n, o, 0).C == 3
    rows = topic_rows(n, 3, 10, 12, 3)
    dmv = os.path.join(work, 'min.dmv')
    write_dmv(dmv, rows, ['m%d' % d for d in range(n)])
    c.run_from_start('min-plane', dmv, rows, o)
    # one document fewer: the plane holds fewer than 3 x 3 cells, a usage error
    dmv42 = os.path.join(work, 'min42.dmv')
    write_dmv(dmv42, rows[:42], ['m%d' % d for d in range(42)])
    assert params_at(42, o, 0).C == 2
    r = c.docmine(['--vectors', dmv42, '-o', os.path.join(work, 'min42')] + o.cli(), expect=None)
    c.checks += 1
    if r.returncode != 2 or '3 x 3' not in r.stderr:
        c.fail('42 documents at --neighbours 15: exit %d (%s), expected 2 and the 3 x 3 cells message' %
               (r.returncode, r.stderr.strip()))
    # shrinking below 3 x 3 cells by the last iteration: refused as well
    o2 = Options(iterations=3, shrink=0.5, neighbours=15.0, seed=4, threshold=0.25)
    r = c.docmine(['--vectors', dmv, '-o', os.path.join(work, 'min-shrink')] + o2.cli(), expect=None)
    c.checks += 1
    if r.returncode != 2:
        c.fail('43 documents shrinking to half: exit %d, expected 2' % r.returncode)

    # 5. one document: no neighbours, it flies straight on the (shrinking) torus
    o = Options(iterations=10, shrink=0.5, neighbours=0.08, seed=9)
    assert plane_ok(1, o)
    rows = [([3, 7], [f32(0.6), f32(0.8)])]
    dmv = os.path.join(work, 'one.dmv')
    write_dmv(dmv, rows, ['only'])
    st = c.run_from_start('one-document', dmv, rows, o)
    if st is not None:
        x0 = initial_state(1, o)[0]
        c.checks += 1
        if (st[0][2], st[0][3]) != (x0[2], x0[3]):
            c.fail('one document: its velocity changed without neighbours')

    # 5b. one document crossing the seam by a hair: (x + v) ratio rounds onto the plane's edge
    o = Options(iterations=4, shrink=0.5, neighbours=0.08, seed=9)
    tpl = c.template('one-seam', dmv, o)
    if tpl is not None:
        W = params_at(1, o, 3).W
        for name, s0 in (('neg', (0.0, 0.0, -1e-20, -1e-300)),
                         ('pos', (math.nextafter(W, 0.0), math.nextafter(W, 0.0), 1e-17, 1e-17))):
            c.run_resumed('one-seam-' + name, dmv, rows, o, 3, [s0], tpl)

    # 5c. docmine flock --synth N (vectors generated inside docmine): with every weight 0 the
    #     vectors do not matter, so the oracle predicts the straight flight on the shrinking torus
    #     and the pairs within r (not which are similar)
    for iters in (1, 2, 5, 10):
        n = 200
        o = Options(iterations=iters, weights=(0.0, 0.0, 0.0, 0.0), shrink=0.5, seed=21)
        out = os.path.join(work, 'synth-it%d' % iters)
        os.makedirs(out, exist_ok=True)
        rep = os.path.join(out, 'report.json')
        if c.docmine(['--synth', str(n), '--synth-topics', '3', '--synth-tokens', '30', '-o', out,
                      '--checkpoint-every', str(iters), '--report', rep] + o.cli()) is None:
            continue
        allsim = [[True] * n for _ in range(n)]
        st = initial_state(n, o)
        pairs = 0
        for t in range(iters):
            st, nb = step(st, allsim, n, o, t)
            pairs += sum(map(len, nb))
        import json
        got_pairs = json.load(open(rep))['counters'].get('flock.pairs', {}).get('sum', 0)
        c.checks += 1
        if got_pairs != pairs:
            c.fail('synth-it%d: report counts %d pairs within r, the oracle %d' % (iters, got_pairs, pairs))
        c.compare('synth-it%d (checkpoint)' % iters, read_ckpt(os.path.join(out, 'flock.ckpt'))[1], st)

    # 5d. the separation softening as flock.h documents min_dist: a neighbour at d pushes with
    #     d / max(d, min_dist r)^2, less than at min_dist r when closer (the documentation said
    #     "as if at min_dist r", 1 / (min_dist r), which the model never did: its text was
    #     corrected). Two dissimilar boids 0.01 r apart, at rest, one iteration: boid 0 moves by
    #     w_dis 0.01 / (min_dist r)^2 = 0.04 (the old text's 0.2).
    o = Options(iterations=1, shrink=0.0, neighbours=0.16, seed=3, threshold=0.5, weights=(0.0, 0.01, 0.0, 0.0))
    rows2 = [([1], [1.0]), ([2], [1.0])]
    dmv2 = os.path.join(work, 'two.dmv')
    write_dmv(dmv2, rows2, ['a', 'b'])
    tpl = c.template('soft', dmv2, o)
    if tpl is not None:
        c.run_resumed('softening', dmv2, rows2, o, 0, [(3.0, 3.0, 0.0, 0.0), (3.01, 3.0, 0.0, 0.0)], tpl)
        got = read_ckpt(os.path.join(work, 'softening', 'flock.ckpt'))[1]
        d = 0.01
        documented = -o.w_dis * d / max(d, o.min_dist * o.radius) ** 2
        c.checks += 1
        if abs(got[0][2] - documented) > 1e-9:
            c.fail('separation softening: a neighbour 0.01 r away pushes with %.6g, flock.h documents %.6g'
                   % (-got[0][2], -documented))

    # 5e. a checkpoint velocity above the speed cap is refused on resume (a velocity of 1e200
    #     squared to inf in dm_flock_update's cap, whose factor v_max / inf = 0 stopped the boid).
    #     One document.
    o = Options(iterations=2, shrink=0.0, neighbours=0.08, seed=9)
    rows1 = [([3, 7], [f32(0.6), f32(0.8)])]
    dmv1 = os.path.join(work, 'one-cap.dmv')
    write_dmv(dmv1, rows1, ['only'])
    tpl = c.template('cap', dmv1, o)
    if tpl is not None:
        ck = os.path.join(work, 'cap', 'flock.ckpt')
        os.makedirs(os.path.dirname(ck), exist_ok=True)
        for vel in ((1e200, 0.0), (o.vmax * 1.001, 0.0)):
            write_ckpt(ck, tpl, 1, [(1.0, 1.0, vel[0], vel[1])])
            r = c.docmine(['--vectors', dmv1, '-o', os.path.dirname(ck), '--checkpoint-every', '1', '--resume'] + o.cli(),
                          expect=1)
            c.checks += 1
            if r is not None and 'above the speed cap' not in r.stderr:
                c.fail('a checkpoint velocity of %g: refused without naming the speed cap: %s' % (vel[0], r.stderr.strip()))
        # a velocity at the cap itself is a checkpoint's own: accepted
        write_ckpt(ck, tpl, 1, [(1.0, 1.0, o.vmax, 0.0)])
        c.docmine(['--vectors', dmv1, '-o', os.path.dirname(ck), '--checkpoint-every', '1', '--resume'] + o.cli())
        c.checks += 1

    # 6. the double-precision model (no fixed point) stays within 1e-6 of docmine over 2 steps
    n = 150
    rows = topic_rows(n, 4, 30, 40, 7)
    o = Options(iterations=2, threshold=0.3, shrink=0.3, seed=11)
    got = read_ckpt(os.path.join(work, 'topics-it2', 'flock.ckpt'))[1]
    urows = unit_rows(rows)
    st = initial_state(n, o)
    for t in range(2):
        st = step_float(st, urows, n, o, t)
    c.compare('plain double model, 2 iterations', got, st, tol=1e-6)

    print('flock oracle: %d comparisons, largest difference %.3g, %d failures' % (c.checks, c.worst,
                                                                                  len(c.failures)))
    return 1 if c.failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == 'selftest':
        selftest()
        return 0
    if len(argv) == 5 and argv[1] == 'check':
        selftest()
        work = argv[4]
        os.makedirs(work, exist_ok=True)
        return check(argv[2], argv[3], work)
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
