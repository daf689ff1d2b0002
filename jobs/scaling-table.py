#!/usr/bin/env python3
"""Turns the report.json files of a weak-scaling series into a CSV table and a PNG plot.

    jobs/scaling-table.py DIR [--points LIST] [--csv FILE] [--png FILE] [--builtin-plot]

Reads every DIR/*/report.json of `docmine pipeline` (one per point: jobs/weak-scaling.sh writes
DIR/<method>-<gpus>/), or with --points only the points named (comma-separated <method>-<gpus>,
as the driver passes them: a series run into a DIR that holds an older one then reads only its
own), and writes (defaults) DIR/weak-scaling.csv and DIR/weak-scaling.png: time of the whole
pipeline (the slowest rank's pipeline.total timer) and weak-scaling efficiency E(n) = T(n0) / T(n)
against the smallest point n0 of the same method and documents per GPU (normally 1 GPU), per
number of GPUs (ranks), with the 90% target line. Also prints the table. A point without a
readable report (a failed run), or whose report lacks pipeline.total, is a row of its own with
its reason in the status column; when that point is n0, its series has no efficiency (it is not
taken against another point).

When DIR/.shared/ holds the concurrent 1-rank runs of `weak-scaling.sh --shared-baseline` (the
1-GPU point on every GPU of the host at once, run i on rank i's share of the largest point's
documents), it also prints and writes DIR/shared-host.csv:
per method the 1-GPU time alone, the slowest concurrent run (1 GPU on a fully loaded host), the
largest point, and the efficiency against each baseline, stage by stage. Only runs of shares of
the largest point that has a time count (--synth-share i/G with G its GPUs): runs of another G,
e.g. an older series' when that point failed, are not its baseline.

The plot uses matplotlib when it is installed, else a built-in PNG writer (zlib + a 5x7 bitmap
font, standard library only), so it works on machines without matplotlib. Exit 1 when DIR holds
no report or a point of the table failed (the table and plot are still written), 2 on bad
arguments.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import struct
import sys
import zlib

COLUMNS = ["method", "gpus", "documents", "documents_per_gpu", "total_s", "preprocess_s", "tfidf_s",
           "cluster_s", "documents_per_s", "efficiency", "nmi", "backend", "gpu", "report", "status"]
NUMBERS = ["documents", "documents_per_gpu", "total_s", "preprocess_s", "tfidf_s", "cluster_s",
           "documents_per_s", "efficiency", "nmi"]
POINT = re.compile(r"^(flock|streamclust)-([1-9][0-9]*)$")
NAN = float("nan")


def ok(v):
    return isinstance(v, (int, float)) and not math.isnan(v)


def timer_max(rep, name):
    t = rep.get("timers_s", {}).get(name)
    try:
        return float(t["max"])
    except (TypeError, KeyError, ValueError):
        return NAN


def failed(method, gpus, path, status):
    row = {c: NAN for c in NUMBERS}
    row.update(method=method, gpus=gpus, backend="?", gpu="?", report=path, status=status)
    return row


def read(path, name):
    """The row of one point's report; a failed row (status says why) when the report is missing
    or unreadable and the point's name (<method>-<gpus>) says which point it is, else None."""
    m = POINT.match(name)
    try:
        with open(path) as f:
            rep = json.load(f)
        if not isinstance(rep, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        why = "no report.json" if isinstance(e, FileNotFoundError) else f"unreadable report.json ({e})"
        print(f"scaling-table: {path}: {why}", file=sys.stderr)
        return failed(m.group(1), int(m.group(2)), path, why) if m else None
    if rep.get("command") != "pipeline":
        print(f"scaling-table: skipping {path}: not a docmine pipeline report", file=sys.stderr)
        return failed(m.group(1), int(m.group(2)), path, "not a pipeline report") if m else None
    res = rep.get("results", {})
    ranks = int(rep.get("ranks", 0))
    if ranks < 1:  # no point on the GPUs axis
        print(f"scaling-table: {path}: no ranks in report.json", file=sys.stderr)
        return failed(m.group(1), int(m.group(2)), path, "no ranks in report.json") if m else None
    share = str(res.get("input", {}).get("share", ""))  # "i/G" of a --synth-share run
    docs = int(res.get("documents", 0))
    devs = rep.get("devices", [])
    row = {
        "method": res.get("method", "?"),
        "gpus": ranks,
        "documents": docs,
        "documents_per_gpu": docs // ranks if ranks else 0,
        "total_s": timer_max(rep, "pipeline.total"),
        "preprocess_s": timer_max(rep, "pipeline.preprocess"),
        "tfidf_s": timer_max(rep, "pipeline.tfidf"),
        "cluster_s": timer_max(rep, "pipeline.cluster"),
        "documents_per_s": res.get("throughput", {}).get("documents_per_second", NAN),
        "efficiency": NAN,
        "nmi": res.get("quality", {}).get("nmi", NAN),
        "backend": rep.get("backend", "?"),
        "gpu": devs[0].get("gpu", "?") if devs else "?",
        "report": path,
        "status": "ok" if ok(timer_max(rep, "pipeline.total")) else "no pipeline.total timer",
        "share_of": int(share.split("/")[1]) if re.fullmatch(r"[0-9]+/[0-9]+", share) else 0,
    }
    if m and (row["method"], row["gpus"]) != (m.group(1), int(m.group(2))):
        row["status"] = f"report of {row['method']}-{row['gpus']}, not of {name}"
    return row


def load(directory, points=None):
    """Rows of the points named (all of DIR/*/report.json without points), sorted by method,
    documents per GPU and GPUs, with the efficiency of each against its series' smallest point."""
    rows = []
    if points is None:
        for path in sorted(glob.glob(os.path.join(directory, "*", "report.json"))):
            r = read(path, os.path.basename(os.path.dirname(path)))
            if r:
                rows.append(r)
    else:
        rows = [read(os.path.join(directory, p, "report.json"), p) for p in points]
    rows.sort(key=lambda r: (r["method"], r["gpus"], r["documents_per_gpu"] if ok(r["documents_per_gpu"]) else -1))
    # a series: one method at one number of documents per GPU; its baseline n0 is its smallest
    # point, counting the method's points that have no report (whose documents are unknown)
    lost = [r for r in rows if not ok(r["documents_per_gpu"])]
    for (m, dpg), pts in series(rows).items():
        if not ok(dpg):
            continue
        n0 = min(r["gpus"] for r in pts + [r for r in lost if r["method"] == m])
        base = next((r for r in pts if r["gpus"] == n0 and r["status"] == "ok"), None)
        if base is None:
            print(f"scaling-table: {m}, {dpg} documents per GPU: the {n0}-GPU point failed; "
                  f"no efficiency for this series", file=sys.stderr)
            continue
        if n0 != 1:
            print(f"scaling-table: {m}, {dpg} documents per GPU: efficiency against the {n0}-GPU point "
                  f"(no 1-GPU point)", file=sys.stderr)
        for r in pts:
            if r["status"] == "ok" and r["total_s"] > 0:
                r["efficiency"] = base["total_s"] / r["total_s"]
    return rows


def write_csv(rows, path, columns=COLUMNS):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items() if k in columns})
    os.replace(tmp, path)


def print_table(rows):
    print(f"{'method':<12} {'gpus':>4} {'docs':>10} {'docs/gpu':>9} {'total s':>8} {'prep s':>7} {'tfidf s':>7} "
          f"{'clust s':>7} {'docs/s':>10} {'eff':>6} {'NMI':>6}")
    for r in rows:
        if not ok(r["documents"]):
            print(f"{r['method']:<12} {r['gpus']:>4} FAILED: {r['status']}")
            continue
        print(f"{r['method']:<12} {r['gpus']:>4} {r['documents']:>10} {r['documents_per_gpu']:>9} "
              f"{r['total_s']:>8.2f} {r['preprocess_s']:>7.2f} {r['tfidf_s']:>7.2f} {r['cluster_s']:>7.2f} "
              f"{r['documents_per_s']:>10.0f} {100 * r['efficiency']:>5.1f}% {r['nmi']:>6.3f}"
              + ("" if r["status"] == "ok" else f"  FAILED: {r['status']}"))


SHARED_COLUMNS = ["method", "stage", "gpus", "alone_s", "shared_s", "largest_s", "efficiency",
                  "efficiency_vs_shared", "concurrent_runs"]


def shared_host(rows, directory):
    """Rows of the shared-host table, or [] when DIR/.shared holds no report."""
    conc = [r for r in load(os.path.join(directory, ".shared")) if r["status"] == "ok"]
    out = []
    for (m, dpg), pts in series(rows).items():
        pts = [r for r in pts if r["status"] == "ok"]
        one = next((r for r in pts if r["gpus"] == 1), None)
        if one is None or pts[-1]["gpus"] < 2:
            continue
        big = pts[-1]
        # the runs of the largest point's shares only (not those of another number of GPUs)
        runs = [r for r in conc if r["method"] == m and r["documents_per_gpu"] == dpg and r["share_of"] == big["gpus"]]
        if not runs:
            continue
        for stage in ("total_s", "preprocess_s", "tfidf_s", "cluster_s"):
            sh = max(r[stage] for r in runs)
            out.append({"method": m, "stage": stage[:-2], "gpus": big["gpus"], "alone_s": one[stage],
                        "shared_s": sh, "largest_s": big[stage],
                        "efficiency": one[stage] / big[stage] if big[stage] > 0 else float("nan"),
                        "efficiency_vs_shared": sh / big[stage] if big[stage] > 0 else float("nan"),
                        "concurrent_runs": len(runs)})
    return out


def print_shared(rows):
    print("\nshared host: the 1-GPU point alone, and on every GPU at once (slowest of the concurrent runs)")
    print(f"{'method':<12} {'stage':<11} {'1 alone s':>9} {'1 shared s':>10} {'G':>3} {'G GPUs s':>9} "
          f"{'eff':>6} {'eff vs shared':>13}")
    for r in rows:
        print(f"{r['method']:<12} {r['stage']:<11} {r['alone_s']:>9.2f} {r['shared_s']:>10.2f} {r['gpus']:>3} "
              f"{r['largest_s']:>9.2f} {100 * r['efficiency']:>5.1f}% {100 * r['efficiency_vs_shared']:>12.1f}%")


def series(rows):
    """Rows by (method, documents per GPU), in the order of rows."""
    out = {}
    for r in rows:
        out.setdefault((r["method"], r["documents_per_gpu"]), []).append(r)
    return out


def plot_series(rows):
    """(label, points) per series with reports, sorted; the label names the documents per GPU
    when a method has more than one series."""
    ser = {k: [r for r in pts if ok(r["documents"])] for k, pts in series(rows).items() if ok(k[1])}
    out = []
    for (m, dpg), pts in sorted(ser.items()):
        several = sum(1 for k in ser if k[0] == m) > 1
        out.append((f"{m} {dpg}/gpu" if several else m, pts))
    return out


# ---- plot with matplotlib ----------------------------------------------------------------------

def plot_matplotlib(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for m, pts in plot_series(rows):
        g = [p["gpus"] for p in pts]
        a.plot(g, [p["total_s"] for p in pts], "o-", label=m)
        b.plot(g, [100 * p["efficiency"] for p in pts], "o-", label=m)
    b.axhline(90, color="grey", linestyle="--", label="90% target")
    for ax, yl in ((a, "time (s)"), (b, "weak-scaling efficiency (%)")):
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel(yl)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r["gpus"] for r in rows}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend()
    a.set_ylim(bottom=0)
    b.set_ylim(0, 120)
    fig.suptitle(title)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)


# ---- plot without matplotlib: RGB raster, lines, 5x7 font, PNG via zlib -------------------------

FONT = {  # 5x7 glyphs, rows top to bottom, '#' = ink
    "0": ".###.#...##..###.#.###..##...#.###.", "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#...#...#...#...#####", "3": "#####...#...#.....#.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.", "5": "######....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.", "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.", "9": ".###.#...##...#.####....#...#..##..",
    "A": ".###.#...##...#######...##...##...#", "B": "####.#...##...#####.#...##...#####.",
    "C": ".###.#...##....#....#....#...#.###.", "D": "###..#..#.#...##...##...##..#.###..",
    "E": "######....#....####.#....#....#####", "F": "######....#....####.#....#....#....",
    "G": ".###.#...##....#.####...##...#.####", "H": "#...##...##...#######...##...##...#",
    "I": ".###...#....#....#....#....#...###.", "J": "..###...#....#....#....#.#..#..##..",
    "K": "#...##..#.#.#..##...#.#..#..#.#...#", "L": "#....#....#....#....#....#....#####",
    "M": "#...###.###.#.##...##...##...##...#", "N": "#...##...###..##.#.##..###...##...#",
    "O": ".###.#...##...##...##...##...#.###.", "P": "####.#...##...#####.#....#....#....",
    "Q": ".###.#...##...##...##.#.##..#..##.#", "R": "####.#...##...#####.#.#..#..#.#...#",
    "S": ".####.....#.....###.....#....#####.", "T": "#####..#....#....#....#....#....#..",
    "U": "#...##...##...##...##...##...#.###.", "V": "#...##...##...##...##...#.#.#...#..",
    "W": "#...##...##...##.#.##.#.##.#..#.#..", "X": "#...##...#.#.#...#...#.#.#...##...#",
    "Y": "#...##...#.#.#...#....#....#....#..", "Z": "#####....#...#...#...#...#....#####",
    " ": "." * 35, ".": "." * 30 + "..#..", ",": "......................#....#...#...", "-": "." * 15 + "#####" + "." * 15,
    "%": "##...##..#...#...#...#...#..##...##", "(": "...#...#...#....#....#.....#.....#.",
    ")": ".#.....#.....#....#....#...#...#...", "/": "....#....#...#...#...#...#....#....",
    ":": "." * 5 + "..#.." + "." * 10 + "..#.." + "." * 10, "=": "." * 10 + "#####" + "....." + "#####" + "." * 10,
    "_": "." * 30 + "#####",
}
COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c, r=0):
        for yy in range(int(y) - r, int(y) + r + 1):
            for xx in range(int(x) - r, int(x) + r + 1):
                if 0 <= xx < self.w and 0 <= yy < self.h:
                    i = 3 * (yy * self.w + xx)
                    self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, r=0, dash=0):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for k in range(n + 1):
            if dash and (k // dash) % 2:
                continue
            t = k / n
            self.dot(x0 + t * (x1 - x0), y0 + t * (y1 - y0), c, r)

    def text(self, x, y, s, c=(0, 0, 0), scale=2, anchor="left"):
        s = s.upper()
        width = len(s) * 6 * scale
        if anchor == "center":
            x -= width // 2
        elif anchor == "right":
            x -= width
        for ch in s:
            g = FONT.get(ch, FONT[" "])
            for row in range(7):
                for col in range(5):
                    if g[row * 5 + col] == "#":
                        for dy in range(scale):
                            for dx in range(scale):
                                self.dot(x + col * scale + dx, y + row * scale + dy, c)
            x += 6 * scale

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[3 * self.w * y:3 * self.w * (y + 1)]) for y in range(self.h))

        def chunk(tag, data):
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)


def nice_max(v):
    if not v > 0:
        return 1.0
    m = 10 ** len(str(int(v))) / 10 if v >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if step * m >= v:
            return step * m
    return v


def plot_builtin(rows, path, title):
    import math
    cv = Canvas(1000, 420)
    cv.text(500, 8, title, anchor="center")
    gpus = sorted({r["gpus"] for r in rows})
    lx = [math.log2(g) for g in gpus]
    lo, hi = min(lx), max(lx)
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    ser = plot_series(rows)
    tmax = nice_max(max((r["total_s"] for r in rows if r["total_s"] == r["total_s"]), default=1.0))
    panels = [("TIME (S)", lambda r: r["total_s"], tmax, 60), ("EFFICIENCY (%)", lambda r: 100 * r["efficiency"], 120.0, 560)]
    for name, val, ymax, x0 in panels:
        left, top, w, h = x0 + 50, 50, 360, 290
        cv.line(left, top + h, left + w, top + h, (0, 0, 0))
        cv.line(left, top, left, top + h, (0, 0, 0))
        for k in range(6):
            yv = ymax * k / 5
            y = top + h - h * k / 5
            cv.line(left - 4, y, left, y, (0, 0, 0))
            cv.line(left + 1, y, left + w, y, (225, 225, 225))
            cv.text(left - 8, y - 5, f"{yv:.3g}", scale=1, anchor="right")
        px = {g: left + 20 + (w - 40) * (math.log2(g) - lo) / (hi - lo) for g in gpus}
        for g in gpus:
            cv.line(px[g], top + h, px[g], top + h + 4, (0, 0, 0))
            cv.text(px[g], top + h + 8, str(g), scale=1, anchor="center")
        cv.text(left + w // 2, top + h + 22, "GPUS (RANKS)", scale=1, anchor="center")
        cv.text(left + w // 2, top - 18, name, anchor="center")
        if name.startswith("EFF"):
            y90 = top + h - h * 90 / ymax
            cv.line(left, y90, left + w, y90, (128, 128, 128), dash=6)
            cv.text(left + w - 4, y90 - 12, "90% TARGET", c=(128, 128, 128), scale=1, anchor="right")
        for i, (m, pts) in enumerate(ser):
            c = COLOURS[i % len(COLOURS)]
            xy = [(px[p["gpus"]], top + h - h * min(max(val(p), 0), ymax) / ymax) for p in pts if val(p) == val(p)]
            for a, b in zip(xy, xy[1:]):
                cv.line(a[0], a[1], b[0], b[1], c, r=1)
            for x, y in xy:
                cv.dot(x, y, c, r=3)
            cv.text(left + 10, top + 8 + 14 * i, m, c=c, scale=1)
    cv.png(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--points", help="comma-separated points <method>-<gpus> (default: every DIR/*/report.json)")
    ap.add_argument("--csv")
    ap.add_argument("--png")
    ap.add_argument("--builtin-plot", action="store_true", help="do not use matplotlib even when it is installed")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        print(f"scaling-table: {a.dir}: not a directory", file=sys.stderr)
        return 2
    points = None
    if a.points is not None:
        points = a.points.split(",")
        bad = [p for p in points if not POINT.match(p)]
        if bad or len(set(points)) != len(points):
            print(f"scaling-table: --points: '{a.points}' is not a list of distinct <method>-<gpus>", file=sys.stderr)
            return 2
    rows = load(a.dir, points)
    good = [r for r in rows if r["status"] == "ok"]
    if not good and points is None:
        print(f"scaling-table: no docmine pipeline report.json under {a.dir}/*/", file=sys.stderr)
        return 1
    csv_path = a.csv or os.path.join(a.dir, "weak-scaling.csv")
    png_path = a.png or os.path.join(a.dir, "weak-scaling.png")
    write_csv(rows, csv_path)
    print_table(rows)
    r0 = (good or rows)[0]
    where = r0["gpu"] if r0["backend"] == "cuda" else "CPU backend"
    dpgs = sorted({r["documents_per_gpu"] for r in good})
    title = f"docmine pipeline weak scaling, {dpgs[0] if len(dpgs) == 1 else 'mixed'} docs per GPU, {where}"
    how = "built-in writer"
    if not a.builtin_plot:
        try:
            plot_matplotlib(rows, png_path, title)
            how = "matplotlib"
        except ImportError:
            plot_builtin(rows, png_path, title)
        except Exception as e:  # a broken matplotlib install must not lose the plot
            print(f"scaling-table: matplotlib failed ({e}); using the built-in writer", file=sys.stderr)
            plot_builtin(rows, png_path, title)
    else:
        plot_builtin(rows, png_path, title)
    print(f"table: {csv_path}\nplot: {png_path} ({how})")
    sh = shared_host(rows, a.dir)
    if sh:
        print_shared(sh)
        sh_path = os.path.join(a.dir, "shared-host.csv")
        write_csv(sh, sh_path, SHARED_COLUMNS)
        print(f"shared-host table: {sh_path}")
    lost = [f"{r['method']}-{r['gpus']} ({r['status']})" for r in rows if r["status"] != "ok"]
    if lost:
        print(f"scaling-table: failed points: {', '.join(lost)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
