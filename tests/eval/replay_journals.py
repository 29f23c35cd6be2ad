#!/usr/bin/env python3
"""Re-decides recorded evaluation rows offline: every row's coordinator journal is replayed
through `stagefrontier journal --json` (the same engine the coordinator runs), so an engine
change can be measured on the very processes an earlier live run recorded, without running
the trainers again. The journals are only read.

  tests/eval/replay_journals.py --rows out/eval/rows.jsonl --runs out/eval \
      --bin bazel-bin/daemon/analyze/stagefrontier --out replayed.jsonl

Each output row is the input row with label, top, candidates, group_wide, windows, top1 and
top2 replaced by the replay's; the summary has the live harness's format. The verdict read is
the one over the last 100 steps, as `sfctl suspects --job J` gives it at the end of a run.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hidden_rank_eval  # noqa: E402


def journal_of(row, runs):
    """The coordinator journal a live run of `row` left under its --out directory `runs`."""
    return os.path.join(runs, f"row{row['index']:02d}", "data", "eval.journal")


def journal_report(journal, binary):
    """`binary journal JOURNAL --json`, parsed: (report, "") or (None, the error it printed)."""
    out = subprocess.run([binary, "journal", journal, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return json.loads(out.stdout), ""


def replay(row, journal, binary):
    """`row` re-decided from `journal`: the verdict over its last 100 steps, judged."""
    report, error = journal_report(journal, binary)
    if report is None:
        return dict(row, error=error, top1=False, top2=False)
    v = report["report"]["verdict"]
    label, top, candidates = hidden_rank_eval.read_verdict(v)
    result = dict(row, label=label, top=top[:2], candidates=candidates[:12], group_wide=v.get("group_wide", False),
                  sync_group=v.get("sync_group", ""),
                  rank_z=round(v["evidence"].get("rank_z", 0), 2),
                  windows=[w["label"] for w in report["windows"]], replayed=True)
    if row.get("stage") is not None:
        result.update(hidden_rank_eval.judge(row, label, top, candidates))
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True, help="rows.jsonl of a live run")
    ap.add_argument("--runs", required=True, help="its --out directory (rowNN/data/eval.journal)")
    ap.add_argument("--bin", default="bazel-bin/daemon/analyze/stagefrontier")
    ap.add_argument("--out", default="")
    ap.add_argument("--seed", type=int, default=20261123)
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.rows) if line.strip()]
    results = [replay(r, journal_of(r, args.runs), args.bin) for r in rows]
    if args.out:
        with open(args.out, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    print(hidden_rank_eval.summarize(results, args.seed))


if __name__ == "__main__":
    main()
