#!/usr/bin/python3
"""The pipeline what-if against the same run without the fault, on real processes.

For each case (a pipeline x data-parallel job on Gloo, GPipe or 1F1B, with one persistent
fault on one rank), the same job runs with and without the fault, in turn, --pairs times, through
stub -> sidecar -> coordinator (pipeline_eval.py's daemons and torchrun). Read on the last
100 of 240 steps:
  saving     the what-if saving of the injected (stage, rank) in the verdict's suspects
             (what_if_saving_ns: exposed time per step saved if that cell behaved like its
             peers; 0 when the cell is not among the suspects)
  growth     the mean exposed step of the faulty run minus that of the run without the fault
             (sfctl steps: what the fault cost the job)
The saving is right when it matches the growth; the table prints both, their ratio and the
verdict. The cases are fixed (not drawn): every fault stage, first, middle and last pipeline
stages, 2-4 micro-batches, both schedules. On a machine with fewer cores than ranks a sleeping
rank leaves its core to the others, so a fault can cost the job less than its own length;
--stage-work-ms adds sleeping work (as a GPU's would be) to every pipeline stage, so that the
ranks compete less for the cores.

    bazel build //daemon/coordinator:all //daemon/sidecar:all //daemon/sfctl:all \
        //client/python:package
    /usr/bin/python3 tests/eval/what_if_eval.py --out docs/data/what_if_eval_20261127.jsonl
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

import hidden_rank_eval
import pipeline_eval

# (P, D, M, schedule, stage, rank, fault ms): rank r holds pipeline stage r // D.
CASES = [
    (2, 2, 2, "gpipe", "fwd", 3, 6.0),
    (3, 2, 4, "gpipe", "bwd", 2, 5.0),
    (2, 3, 3, "gpipe", "data", 1, 4.0),
    (2, 2, 2, "1f1b", "fwd", 3, 6.0),
    (2, 2, 4, "1f1b", "bwd", 0, 5.0),
    (3, 2, 4, "1f1b", "fwd", 2, 5.0),
    (3, 2, 3, "1f1b", "apply", 5, 4.0),
    (4, 2, 4, "1f1b", "bwd", 4, 6.0),
    (2, 3, 3, "1f1b", "data", 4, 4.0),
]
STEPS = 240


def mean_exposed_ms(port, job):
    steps = hidden_rank_eval.sfctl(port, "steps", "--job", job, "--from", str(STEPS - 100),
                                   "--to", str(STEPS - 1))["steps"]
    return statistics.mean(int(s["exposed_ns"]) for s in steps) / 1e6 if steps else None


def run_one(case, faulty, index, work, daemons, port, master_port, work_ms):
    p, d, m, schedule, stage, rank, ms = case
    row = dict(index=index, job=f"wi{index}", shape=[p, d], micro=m, steps=STEPS,
               schedule=schedule, stage_work_ms=[work_ms] * p if work_ms else None, stage=None)
    if faulty:
        row.update(stage=stage, rank=rank, fault_ms=ms, every=1, start=0)
    daemons.ensure()
    rc, ms_step, text = pipeline_eval.run_torchrun(row, work, daemons, master_port, 300)
    out = dict(case=list(case), faulty=faulty, stage_work_ms=work_ms, job=row["job"], torchrun_rc=rc,
               ms_per_step=ms_step)
    if rc != 0 or hidden_rank_eval.wait_steps(port, row["job"], STEPS, timeout=30) < STEPS:
        out["error"] = f"torchrun {rc}: " + " | ".join(text.strip().splitlines()[-3:])
        return out
    out["exposed_ms"] = mean_exposed_ms(port, row["job"])
    v = hidden_rank_eval.sfctl(port, "suspects", "--job", row["job"])["verdict"]
    saving = [int(s.get("what_if_saving_ns", 0)) / 1e6 for s in v.get("suspects", [])
              if s["stage"] == stage and int(s["rank"]) == rank]
    out.update(label=v["label"], reason=v.get("reason", ""), sync_group=v.get("sync_group", ""),
               top=[(s["stage"], int(s["rank"])) for s in v.get("suspects", [])[:2]],
               saving_ms=saving[0] if saving else 0.0)
    return out


def summarize(results):
    lines = [f"{'case':<34}{'growth':>9}{'saving':>9}{'ratio':>7}  verdict (faulty run)"]
    by_case = {}
    for r in results:
        by_case.setdefault(tuple(r["case"]), []).append(r)
    ratios = []
    for case, rs in by_case.items():
        on = [r for r in rs if r["faulty"] and "error" not in r]
        off = [r for r in rs if not r["faulty"] and "error" not in r]
        p, d, m, schedule, stage, rank, ms = case
        name = f"{p}x{d} M={m} {schedule} {stage}:{rank}:{ms:g}"
        if not on or not off:
            lines.append(f"{name:<34} error")
            continue
        growth = statistics.mean(r["exposed_ms"] for r in on) - \
            statistics.mean(r["exposed_ms"] for r in off)
        saving = statistics.mean(r["saving_ms"] for r in on)
        ratio = saving / growth if growth > 0 else float("nan")
        ratios.append(ratio)
        verdicts = ", ".join(f"{r['label']} {r['reason']} {r['sync_group']} {r['top'][:1]}".strip()
                             for r in on)
        lines.append(f"{name:<34}{growth:>8.2f}ms{saving:>7.2f}ms{ratio:>7.2f}  {verdicts}")
    if ratios:
        lines.append(f"saving / growth: median {statistics.median(ratios):.2f}, "
                     f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} cases")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/what_if_eval.jsonl")
    ap.add_argument("--work", default="out/what_if_eval")
    ap.add_argument("--port", type=int, default=18451)
    ap.add_argument("--master-port", type=int, default=29700)
    ap.add_argument("--pairs", type=int, default=1, help="runs with and without each fault")
    ap.add_argument("--stage-work-ms", type=float, default=0,
                    help="extra sleep in fwd and in bwd of every pipeline stage (balanced): work "
                         "that, like a GPU's, leaves the CPU to the other ranks")
    ap.add_argument("--bin", default="bazel-bin")
    ap.add_argument("--only-print", action="store_true")
    args = ap.parse_args()
    pipeline_eval.BIN = hidden_rank_eval.BIN = args.bin
    if args.only_print:
        with open(args.out) as f:
            print(summarize([json.loads(line) for line in f if line.strip()]))
        return 0
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    open(args.out, "w").close()
    daemons = pipeline_eval.Daemons(args.work, args.port)
    results, index, t0 = [], 0, time.time()
    try:
        for case in CASES:
            for pair in range(args.pairs):
                for faulty in ((True, False) if pair % 2 == 0 else (False, True)):
                    r = run_one(case, faulty, index, args.work, daemons, args.port,
                                args.master_port + index, args.stage_work_ms)
                    index += 1
                    results.append(r)
                    pipeline_eval.record(args.out, r)
    finally:
        daemons.stop()
    print(f"wall time: {time.time() - t0:.0f} s for {len(results)} runs")
    print(summarize(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
