#!/usr/bin/python3
"""What a journal's stage marks carry about an injected fault, whatever decides on them: per
step from the fault's start, the faulty rank's duration of the stage minus the median of its
role peers' (the ranks it is compared with: same pipeline stage, same tensor position), and how
many standard errors that gap stands from zero over the whole run and in each 100-step window
(the coordinator's windows). A miss whose gap stands at z 1-2 in the verdict's window is below
what 100 steps of these marks can show on this machine: the gap's step-to-step noise buries the
fault. A gap at z 10 that was missed is the engine's.

    python3 tests/eval/fault_signal.py --bin bazel-bin/daemon/analyze/stagefrontier \
        out/pipeline_eval/data1/pe3.journal --rank 5 --peers 2 --stage fwd --start 40

The journal is read with `stagefrontier journal JOURNAL --out RUN` (its steps as a run file,
one JSON object per rank-step with the schema and the stage boundaries).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

WINDOW = 100


def stage_durations(journal, binary, stage):
    """{(rank, step): duration of `stage` in ms} from `binary journal JOURNAL --out RUN`."""
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run.jsonl")
        out = subprocess.run([binary, "journal", journal, "--out", run], capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{binary} journal {journal}: {out.stderr.strip()[:200]}")
        durations = {}
        with open(run) as f:
            for line in f:
                r = json.loads(line)
                names = [s[0] for s in r["schema"]]
                if stage not in names:
                    raise ValueError(f"stage {stage!r} is not in the journal's schema {names}")
                k = names.index(stage)
                b = r["boundaries_ns"]
                durations[(r["rank"], r["step"])] = (b[k + 1] - b[k]) / 1e6
        return durations


def z_of(gaps):
    if len(gaps) < 2:
        return 0.0
    sd = statistics.stdev(gaps)
    return statistics.mean(gaps) * math.sqrt(len(gaps)) / sd if sd > 0 else 0.0


def signal(durations, rank, peers, start, verdict_window=None):
    """The gap of `rank` against the median of `peers`, steps >= start where all are present:
    {steps, gap_ms, sd_ms, z_run, z_windows: [(first step, z), ...]}, and z_verdict over the
    steps of `verdict_window` ((first, last) step, the verdict's window) when given."""
    gaps = {}
    for (r, step), d in durations.items():
        if r != rank or step < start:
            continue
        others = [durations.get((p, step)) for p in peers]
        if others and None not in others:
            gaps[step] = d - statistics.median(others)
    ordered = [gaps[s] for s in sorted(gaps)]
    windows = {}
    for s, g in gaps.items():
        windows.setdefault(s // WINDOW * WINDOW, []).append(g)
    out = dict(steps=len(ordered),
                gap_ms=round(statistics.mean(ordered), 3) if ordered else 0.0,
                sd_ms=round(statistics.stdev(ordered), 3) if len(ordered) > 1 else 0.0,
                z_run=round(z_of(ordered), 2),
                z_windows=[[w, round(z_of(windows[w]), 2)] for w in sorted(windows)])
    if verdict_window:
        first, last = verdict_window
        out["z_verdict"] = round(z_of([g for s, g in gaps.items() if first <= s <= last]), 2)
    return out


def journal_signal(journal, binary, rank, peers, stage, start, verdict_window=None):
    return signal(stage_durations(journal, binary, stage), rank, peers, start, verdict_window)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("journal")
    ap.add_argument("--bin", default="bazel-bin/daemon/analyze/stagefrontier",
                    help="the analyzer (stagefrontier) that reads the journal")
    ap.add_argument("--rank", type=int, required=True, help="the faulty rank")
    ap.add_argument("--peers", required=True, help="its role peers, comma-separated")
    ap.add_argument("--stage", required=True, help="the faulty stage")
    ap.add_argument("--start", type=int, default=0, help="the fault's first step")
    args = ap.parse_args()
    peers = [int(p) for p in args.peers.split(",") if p]
    if not peers or args.rank in peers:
        ap.error("--peers: one or more ranks other than --rank")
    try:
        s = journal_signal(args.journal, args.bin, args.rank, peers, args.stage, args.start)
    except (RuntimeError, ValueError) as e:
        print(f"fault_signal: {e}", file=sys.stderr)
        return 1
    if s["steps"] == 0:
        print(f"fault_signal: no step >= {args.start} holds rank {args.rank} and every peer",
              file=sys.stderr)
        return 1
    print(json.dumps(s))
    print(f"rank {args.rank} {args.stage} against the median of ranks {args.peers}: "
          f"{s['gap_ms']:+.2f} ms a step (sd {s['sd_ms']:.2f} ms, {s['steps']} steps), "
          f"z {s['z_run']:.1f} over the run; per window: "
          + ", ".join(f"{w}: {z:.1f}" for w, z in s["z_windows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
