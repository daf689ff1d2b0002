#!/usr/bin/env python3
"""Summarises flock step traces (DOCMINE_FLOCK_TRACE=PREFIX writes PREFIX.RANK.tsv per rank).

    bench/flock/trace_summary.py PREFIX [--skip N]

Exit codes: 0 ok, 1 a trace file that cannot be read, 2 no PREFIX.RANK.tsv file (or bad arguments).

For each rank: the mean step (begin to end, ms) and, for every event, its mean time after the
step's begin (ms) and in how many steps it occurred, in the order the events happen. The first N
iterations (default 5: warm-up, memory growth) are left out. A rank whose halo is received long
after it was sent waits for its neighbours; a device_done long after halo_queued means the
device, not the exchange, ends the step.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys


def load(path):
    """The steps of one rank's trace: (iteration at begin, [(event, seconds)]) from a begin to the
    next end (the end is recorded after the iteration counter moved on)."""
    steps = []
    with open(path, newline="") as f:
        r = csv.DictReader(f, delimiter="\t")
        missing = {"event", "seconds", "iteration"} - set(r.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: not a flock trace (no column {', '.join(sorted(missing))})")
        for row in r:
            try:
                e, t = row["event"], float(row["seconds"])
                if e == "begin":
                    steps.append((int(row["iteration"]), [(e, t)]))
                elif steps:
                    steps[-1][1].append((e, t))
            except (TypeError, ValueError):
                raise ValueError(f"{path}: line {r.line_num}: not a trace line") from None
    return steps


def summarise(path, skip):
    per_event = {}
    order = {}
    lengths = []
    for it, events in load(path):
        if it < skip or events[-1][0] != "end":
            continue
        begin = events[0][1]
        lengths.append(1e3 * (events[-1][1] - begin))
        for k, (e, t) in enumerate(events):
            per_event.setdefault(e, []).append(1e3 * (t - begin))
            order.setdefault(e, []).append(k)
    return lengths, per_event, order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix")
    ap.add_argument("--skip", type=int, default=5)
    a = ap.parse_args()
    # PREFIX.RANK.tsv only (RANK a number): the prefix taken literally (a folder named [x] or with
    # spaces), other files beside the traces (PREFIX.old.tsv) left out
    own = re.compile(re.escape(os.path.basename(a.prefix)) + r"\.(\d+)\.tsv$")
    files = []
    for p in glob.glob(glob.escape(a.prefix) + ".*.tsv"):
        m = own.match(os.path.basename(p))
        if m:
            files.append((int(m.group(1)), p))
    files.sort()
    if not files:
        print(f"trace_summary: no {a.prefix}.RANK.tsv files", file=sys.stderr)
        return 2
    for rank, path in files:
        try:
            lengths, per_event, order = summarise(path, a.skip)
        except (OSError, ValueError) as e:
            print(f"trace_summary: {e}", file=sys.stderr)
            return 1
        if not lengths:
            print(f"rank {rank}: no complete step after iteration {a.skip}")
            continue
        print(f"rank {rank}: {len(lengths)} steps, mean {statistics.mean(lengths):.2f} ms, "
              f"median {statistics.median(lengths):.2f}, max {max(lengths):.2f}")
        for e in sorted(per_event, key=lambda e: statistics.mean(order[e])):
            v = per_event[e]
            print(f"  {e:<20} {statistics.mean(v):9.2f} ms after begin ({len(v)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
