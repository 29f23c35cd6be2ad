#!/usr/bin/env python3
"""How small can the journal's step records get? A design probe for the compact archive
(issue 17; docs/results.md "Archive size: what the records' entropy allows").

For each recorded journal, exports its rank-steps (`stagefrontier journal --out`) and sizes
four encodings of the same stage durations, per rank-stage-step:
  row     one varint per duration, rank-step after rank-step (what the wire packs today,
          without its framing)
  col     columnar: per rank and stage, the zigzag varint of the change from that rank's
          previous step (delta over time)
each raw and after `zstd -19`, at nanosecond precision (lossless: replay exact) and at
microsecond precision (lossy: durations rounded down to 1 us).

  tests/bench/archive_size_probe.py --bin bazel-bin [JOURNAL ...]   (default: tests/eval/recorded)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def varint(v, out):
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def zigzag(v):
    return (v << 1) ^ (v >> 63)


def zstd_size(data):
    return len(subprocess.run(["zstd", "-19", "-c", "-q"], input=bytes(data),
                              capture_output=True, check=True).stdout)


def sizes(by_rank_step, stages, quantum):
    ranks = sorted({r for r, _ in by_rank_step})
    steps = sorted({s for _, s in by_rank_step})
    col = bytearray()
    for r in ranks:
        for k in range(stages):
            prev = 0
            for s in steps:
                d = by_rank_step.get((r, s))
                if d is not None:
                    v = d[k] // quantum
                    varint(zigzag(v - prev), col)
                    prev = v
    row = bytearray()
    for key in sorted(by_rank_step):
        for v in by_rank_step[key]:
            varint(v // quantum, row)
    n = len(by_rank_step) * stages
    return [len(row) / n, zstd_size(row) / n, len(col) / n, zstd_size(col) / n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="bazel-bin", help="where daemon/analyze/stagefrontier is")
    ap.add_argument("journals", nargs="*")
    a = ap.parse_args()
    tool = os.path.join(a.bin, "daemon/analyze/stagefrontier")
    journals = a.journals or sorted(glob.glob("tests/eval/recorded/*.journal"))
    if not journals:
        sys.exit("no journals given and none in tests/eval/recorded")
    print(f"{'journal':58} {'W':>3} {'S':>2} {'rank-steps':>10} | bytes per rank-stage-step: "
          "ns row, row+zstd, col, col+zstd | us row, row+zstd, col, col+zstd")
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for j in journals:
            out = os.path.join(tmp, "steps.jsonl")
            subprocess.run([tool, "journal", j, "--out", out], capture_output=True, check=True)
            rows = [json.loads(line) for line in open(out)]
            if not rows:
                continue
            stages = len(rows[0]["schema"])
            by = {}
            for r in rows:
                b = r["boundaries_ns"]
                by[(r["rank"], r["step"])] = [b[k + 1] - b[k] for k in range(stages)]
            ns, us = sizes(by, stages, 1), sizes(by, stages, 1000)
            totals.append(ns + us)
            print(f"{os.path.basename(j):58} {rows[0]['world_size']:>3} {stages:>2} {len(by):>10} | "
                  + " ".join(f"{x:.2f}" for x in ns) + " | " + " ".join(f"{x:.2f}" for x in us))
    if totals:
        lo = [min(t[i] for t in totals) for i in range(8)]
        hi = [max(t[i] for t in totals) for i in range(8)]
        print("range over journals: " + " ".join(f"{l:.2f}-{h:.2f}" for l, h in zip(lo, hi)))


if __name__ == "__main__":
    main()
