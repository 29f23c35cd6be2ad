#!/usr/bin/env python3
"""Measures the node ledger's false-alarm rate on healthy real runs: the healthy rows of a
recorded evaluation run (tests/eval/hidden_rank_eval.py --out DIR) are charged to nodes in
the order they ran, as if every job had run on the same nodes, by `stagefrontier nodes`
(the coordinator's ledger and class test, offline). A healthy node that ends chronic is a
false alarm; the per-window charge rate says how often a healthy window named a node.

  tests/eval/node_false_alarms.py --bin bazel-bin/daemon/analyze/stagefrontier DIR...

Two placements are tried, since journals do not record nodes: one rank per node (a
multi-node job's view) and every rank on one node (what this single machine really was).
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay_journals  # noqa: E402


def healthy_journals(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "rows.jsonl"))]
    paths = [replay_journals.journal_of(r, run_dir) for r in rows if r.get("pattern") == "healthy"]
    return [p for p in paths if os.path.exists(p)]


def measure(binary, journals, ranks_per_node, window):
    out = subprocess.run([binary, "nodes", "--json", "--ranks-per-node", str(ranks_per_node),
                          "--window", str(window)] + journals,
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    nodes = j["nodes"]
    return {
        "job_windows": sum(int(x["windows"]) for x in j["journals"]),
        "node_windows": sum(int(n["windows"]) for n in nodes),
        "charged": sum(int(n["charged_windows"]) for n in nodes),
        "nodes": len(nodes),
        "chronic": sum(1 for n in nodes if n["node_class"] == "chronic"),
        "transient": sum(1 for n in nodes if n["node_class"] == "transient"),
        "max_ewma": max((n["ewma"] for n in nodes), default=0.0),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the stagefrontier binary")
    ap.add_argument("--windows", default="100,50,25", help="verdict windows to try, in steps")
    ap.add_argument("runs", nargs="+", help="evaluation output directories (with rows.jsonl)")
    a = ap.parse_args()
    total = {"node_seqs": 0, "chronic": 0}
    print(f"{'run':12} {'placement':14} {'window':>6} {'jobs':>5} {'node-windows':>12} "
          f"{'charged':>8} {'rate':>6} {'transient':>9} {'chronic':>7} {'max EWMA':>8}")
    for run in a.runs:
        journals = healthy_journals(run)
        for rpn, placement in ((1, "rank per node"), (1 << 20, "one node")):
            for window in (int(w) for w in a.windows.split(",")):
                m = measure(a.bin, journals, rpn, window)
                total["node_seqs"] += m["nodes"]
                total["chronic"] += m["chronic"]
                print(f"{os.path.basename(run.rstrip('/')):12} {placement:14} {window:>6} "
                      f"{len(journals):>5} {m['node_windows']:>12} {m['charged']:>8} "
                      f"{100.0 * m['charged'] / max(1, m['node_windows']):>5.1f}% "
                      f"{m['transient']:>9} {m['chronic']:>7} {m['max_ewma']:>8.2f}")
    print(f"healthy nodes that ended chronic: {total['chronic']} of {total['node_seqs']} "
          f"node histories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
