#!/usr/bin/python3
"""DDP with BatchNorm on real processes: the verdicts when DDP broadcasts buffers at the start
of every forward (docs/results.md "DDP with BatchNorm"). 3 Gloo ranks of
client/examples/ddp_example.py --batchnorm under torchrun and the zero-code-change launcher,
one sidecar, one coordinator, through hidden_rank_eval's row runner:

  attribution rows  a fault of 8 ms every step from step 40 in one (stage, rank), 200 steps,
                    scored like hidden_rank_eval (top-1, and the label: a single fault should
                    read CLEAR); plus a healthy run per round
  hang rows         one rank sleeps 60 s at step 100 in a stage; the stall verdict's stuck
                    ranks (only the sleeping one should be named stuck)

    bazel build //daemon/coordinator:stagefrontier-coordinator \\
        //daemon/sidecar:stagefrontier-sidecar //daemon/sfctl:sfctl //client/python:package
    /usr/bin/python3 tests/eval/batchnorm_eval.py --rounds 2 --out out/batchnorm_eval
"""
import argparse
import collections
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hidden_rank_eval as h  # noqa: E402

FAULTS = [(0, "data"), (1, "data"), (2, "data"), (2, "forward"), (1, "optimizer"),
          (0, "backward"), (2, "collate")]
HANGS = [("data", 1), ("optimizer", 2), ("backward", 0)]


def attribution_row(rank, stage, work, port):
    """One 200-step run (stage None: healthy); the verdict at the end, scored."""
    flags = h.fault_flags
    h.fault_flags = lambda row: flags(row) + ["--batchnorm"]
    try:
        row = dict(index=0, world=3, kind="ddp", nodes=1, stage=stage, rank=rank, fault_ms=8.0,
                   every=1, start=40, stop=-1,
                   expect_stage="data" if stage == "collate" else stage)
        r = h.run_row(row, work, port)
    finally:
        h.fault_flags = flags
    return {k: r.get(k) for k in ("rank", "stage", "label", "top", "top1", "top2", "windows",
                                  "healthy_step_ms", "error")}


def hang_row(stage, rank, work, port, timeout_s=90):
    """Rank `rank` sleeps 60 s in `stage` of step 100: the first STALLED verdict's ranks."""
    logs = open(os.path.join(work, "daemons.log"), "w")
    procs = h.start_daemons(work, port, 1, logs)
    flags = h.fault_flags
    h.fault_flags = lambda row: ["--batchnorm", "--hang", f"{stage}:{rank}:100:60"]
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1")
        trainers = h.trainers_for(dict(index=0, world=3, kind="ddp", nodes=1), work, port, env,
                                  logs, steps=400)
    finally:
        h.fault_flags = flags
    stall = {}
    deadline = time.time() + timeout_s
    while time.time() < deadline and not stall:
        try:
            sus = h.sfctl(port, "suspects", "--job", "eval")
            stall = sus.get("stall") or sus.get("verdict", {}).get("stall", {})
        except Exception:
            pass
        time.sleep(0.5)
    h.stop(trainers)  # SIGTERM: torchrun ends its workers (the sleeping rank among them)
    h.stop(procs)
    logs.close()
    ranks = [(int(r["rank"]), r.get("stage", ""), r["role"]) for r in stall.get("ranks", [])]
    stuck = [r for r, _, role in ranks if role == "stuck"]
    return dict(hang=f"{stage}:{rank}", reason=stall.get("reason", ""), text=stall.get("text", ""),
                ranks=ranks, ok=stall.get("reason") == "hung" and stuck == [rank])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2, help="each attribution row this many times")
    ap.add_argument("--out", default="out/batchnorm_eval")
    ap.add_argument("--port", type=int, default=18330)
    ap.add_argument("--bin", default="bazel-bin", help="where the built binaries are")
    ap.add_argument("--no-hangs", action="store_true")
    args = ap.parse_args()
    h.BIN = args.bin
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    results = []
    for n in range(args.rounds):
        for rank, stage in FAULTS + [(1, None)]:
            work = os.path.join(args.out, f"r{n}_{stage}_{rank}")
            res = dict(attribution_row(rank, stage, work, args.port), round=n)
            results.append(res)
            print(json.dumps(res), flush=True)
    if not args.no_hangs:
        for stage, rank in HANGS:
            work = os.path.join(args.out, f"hang_{stage}_{rank}")
            os.makedirs(work)
            res = hang_row(stage, rank, work, args.port)
            results.append(res)
            print(json.dumps(res), flush=True)
    faulty = [r for r in results if r.get("stage")]
    healthy = [r for r in results if "stage" in r and not r["stage"]]
    hangs = [r for r in results if "hang" in r]
    labels = collections.Counter(r.get("label") for r in faulty)
    print(f"faulty rows: top-1 {sum(bool(r['top1']) for r in faulty)}/{len(faulty)}, CLEAR "
          f"{labels.get('CLEAR', 0)}/{len(faulty)}; labels: "
          + ", ".join(f"{k} {v}" for k, v in labels.most_common()))
    print(f"healthy runs: {sum(r['label'] == 'HEALTHY' for r in healthy)}/{len(healthy)} HEALTHY")
    if hangs:
        print(f"hang rows: only the sleeping rank named stuck {sum(r['ok'] for r in hangs)}/"
              f"{len(hangs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
