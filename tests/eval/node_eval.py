#!/usr/bin/python3
"""The node-wide fault evaluation on real processes: rows drawn at random with a recorded seed,
each one real two-node run through stub -> two sidecars (`--node n0`, `--node n1`, each on its
own --shm-dir) -> one coordinator, scored on whether the coordinator's verdict names the slowed
node (`sfctl --json suspects --job eval` -> .verdict.node) when every rank of that node is
slowed in the same stage.

Kinds of rows (half the ranks on each node; rank r is on node r // (world / 2)):
  synthetic  client/examples/synthetic_trainer processes, world 8 or 16
  torchloop  tests/eval/workloads/torch_loop.py (data-parallel, Gloo), world 4 or 6, launched
             as two `torch.distributed.run --nnodes 2 --node_rank K` processes (static
             rendezvous on 127.0.0.1, the same --rdzv_id, so TORCHELASTIC_RUN_ID and the job
             are one), each with its node's STAGEFRONTIER_SHM_DIR
  pipeline   tests/eval/workloads/pipeline_loop.py --rank-order dp-major, P=2, world 4 or 8,
             two torchrun nodes as torchloop: each node holds whole pipelines (one rank of
             each pipeline stage per replica it hosts)

Node rows: every rank of one node (n0 or n1 at random) slowed in one non-sync stage (synthetic
data/forward/backward/optimizer; torchloop load/compute/update; pipeline data/fwd/bwd/apply) by
4-12% of the kind's nominal step at its world size (NOMINAL_MS, measured on healthy rows; each
row also records its own healthy step, the median exposed_ns of steps 10-39, and the fault as
a percentage of it: magnitude_pct), persistently from step 40 or, for about a quarter of the
rows, intermittently (every 3-5 steps from 40). 200 steps (pipeline 240, as
tests/eval/pipeline_eval.py). The verdict is the coordinator's current window at the end of
the run, read as a user would with `sfctl --json suspects --job eval`. A row's "node" is the
injected node, "ranks" the slowed ranks, "verdict_node" what .verdict.node said.
  node_named          verdict_node is the injected node and the label is CLEAR
  node_wrongly_named  verdict_node names the other node
  mean_points_at, max_points_at  the cheap dashboards' top stage over every step (`sfctl
                      suspects --window STEPS`): at best the stage, never the node
Control rows (about a quarter of the faulty rows: one rank slowed alike, on a two-node job):
  top1, top2          as tests/eval/hidden_rank_eval.py judge()
  node_wrongly_named  verdict_node is not empty
Healthy rows (two nodes, no fault): HEALTHY at the end, every closed job window's label (as
hidden_rank_eval's watch_all), and node_wrongly_named (verdict_node not empty).
Every row also records `sfctl jobs`, polled while the trainers run (one_job: one job, "eval",
of world size `world`, with all `world` ranks seen reporting at once). On 2 cores a synthetic
row takes ~7 s, a torchloop or pipeline row 15-20 s.

    bazel build //daemon/coordinator:all //daemon/sidecar:all //daemon/sfctl:all \
        //client/examples:synthetic_trainer //client/python:package
    /usr/bin/python3 tests/eval/node_eval.py --rows 24 --controls 8 --healthy 12 \
        --seed 20261128 --out docs/data/node_eval_20261128.jsonl --work out/node_eval
    /usr/bin/python3 tests/eval/node_eval.py --only-print --out docs/data/node_eval_20261128.jsonl

(--bin DIR: binaries and client/python laid out as under bazel-bin, e.g. a copy of them.)
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

# The evaluations' sfctl client, step wait, verdict reading and scoring (BIN set in main()).
import hidden_rank_eval  # noqa: E402
import pipeline_eval  # noqa: E402
from hidden_rank_eval import judge, read_verdict, sfctl, stop, wait_steps  # noqa: E402

BIN = "bazel-bin"
JOB = "eval"  # hidden_rank_eval.trainers_for and watch_all use this job id
KINDS = ["synthetic", "torchloop", "pipeline"]
WORLDS = {"synthetic": [8, 16], "torchloop": [4, 6], "pipeline": [4, 8]}
STEPS = {"synthetic": 200, "torchloop": 200, "pipeline": 240}
# The nominal step by kind and world: the median exposed step (sfctl steps 10-39) of healthy
# two-node rows on the 2-core development box (hidden_rank_eval's NOMINAL_MS is for one node;
# two torchrun nodes run slower).
NOMINAL_MS = {"synthetic": {8: 28.0, 16: 28.0}, "torchloop": {4: 16.0, 6: 34.0},
              "pipeline": {4: 13.0, 8: 28.0}}
FAULT_STAGES = dict(hidden_rank_eval.FAULT_STAGES, pipeline=pipeline_eval.FAULT_STAGES)
FAULT_START = 40
PIPELINE_STAGES = 2


def node_ranks(row, node):
    per = row["world"] // 2
    return list(range(node * per, (node + 1) * per))


def fault_rank_spec(row):
    """The --fault RANK field: R[+R...]."""
    return "+".join(str(r) for r in row["ranks"])


def start_daemons(work, port, logs, torch_kind):
    """hidden_rank_eval.start_daemons with two nodes (sidecars n0, n1 on WORK/shm0, WORK/shm1);
    for the torchrun kinds the coordinator waits for staggered ranks as pipeline_eval's does
    (--step-deadline-ms 10000)."""
    if not torch_kind:
        return hidden_rank_eval.start_daemons(work, port, 2, logs)
    return hidden_rank_eval.start_daemons(work, port, 2, logs,
                                          coordinator_flags=["--step-deadline-ms", "10000"],
                                          settle_s=0.5)


def fault_flags(row):
    if row.get("stage") is None:
        return []
    return ["--fault", f"{row['stage']}:{fault_rank_spec(row)}:{row['fault_ms']:.3f}",
            "--fault-every", str(row["every"]), "--fault-start", str(row["start"])]


def torchrun_nodes(row, work, env, master_port):
    """Two torchrun processes, one per node (static rendezvous), each in its own session."""
    per = row["world"] // 2
    script = {"torchloop": ["tests/eval/workloads/torch_loop.py"],
              "pipeline": ["tests/eval/workloads/pipeline_loop.py", "--rank-order", "dp-major",
                           "--pipeline-stages", str(PIPELINE_STAGES)]}[row["kind"]]
    procs, logs = [], []
    for k in range(2):
        e = dict(env, STAGEFRONTIER_SHM_DIR=os.path.join(work, f"shm{k}"),
                 PYTHONPATH=os.path.abspath(f"{BIN}/client/python"))
        cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "2",
               "--node_rank", str(k), "--nproc_per_node", str(per), "--master_addr",
               "127.0.0.1", "--master_port", str(master_port), f"--rdzv_id={JOB}",
               "--redirects", "2", "--tee", "1", "--log_dir",
               os.path.join(work, f"torchrun{k}"), *script, "--steps", str(row["steps"]),
               *fault_flags(row)]
        log = open(os.path.join(work, f"torchrun{k}.log"), "w")
        procs.append(subprocess.Popen(cmd, env=e, stdout=log, stderr=log,
                                      start_new_session=True))
        logs.append(log)
    return procs, logs


def wait_all(procs, timeout, sessions, port, seen):
    """Exit codes ("timeout" for a process killed at the deadline, with its session when
    SESSIONS: the torchrun launchers each lead one). Meanwhile SEEN[job] collects the most
    ranks `sfctl jobs` saw reporting at once and the job's world size (ranks stop reporting
    when they exit, so this is read while they run)."""
    deadline = time.time() + timeout
    while time.time() < deadline and any(p.poll() is None for p in procs):
        try:
            for j in sfctl(port, "jobs").get("jobs", []):
                old = seen.get(j["job"], (0, 0))
                seen[j["job"]] = (max(old[0], int(j.get("ranks_reporting", 0))),
                                  max(old[1], int(j.get("world_size", 0))))
        except Exception:
            pass
        time.sleep(2)
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            if sessions:
                os.killpg(p.pid, signal.SIGKILL)
            else:
                p.kill()
            p.wait()
            rcs.append("timeout")
    return rcs


def windows_of(port, row):
    """Labels of the job's closed windows (group "job" only for the pipeline's layout)."""
    if row["kind"] == "pipeline":
        events = pipeline_eval.job_windows(
            port, JOB, dict(steps=row["steps"], shape=[PIPELINE_STAGES, 0]))
    else:
        events = hidden_rank_eval.watch_all(port)
    return [e["verdict"]["label"] for e in events]


def run_row(row, work, port, master_port, timeout):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    logs = open(os.path.join(work, "daemons.log"), "w")
    torch_kind = row["kind"] != "synthetic"
    procs = start_daemons(work, port, logs, torch_kind)
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1")
    result = dict(row)
    t0 = time.time()
    tlogs = []
    if torch_kind:
        trainers, tlogs = torchrun_nodes(row, work, env, master_port)
    else:
        # trainers_for reads the --fault rank from row["rank"]: R[+R...] here.
        trainers = hidden_rank_eval.trainers_for(
            dict(row, rank=fault_rank_spec(row)) if row.get("stage") else row, work, port, env,
            logs, steps=row["steps"])
    seen = {}
    rcs = wait_all(trainers, timeout, torch_kind, port, seen)
    for f in tlogs:
        f.close()
    result.update(trainer_s=round(time.time() - t0, 1))
    if any(rc != 0 for rc in rcs):
        bad = [rc for rc in rcs if rc != 0]
        tail = ""
        if torch_kind:
            with open(os.path.join(work, "torchrun0.log")) as f:
                tail = " | ".join(f.read().strip().splitlines()[-4:])
        result.update(error=f"trainers exited {bad[:4]}: {tail}"[:400])
    if torch_kind:
        with open(os.path.join(work, "torchrun0.log")) as f:
            m = re.search(r"(?:pipeline_loop|torch_loop): \d+ steps, ([\d.]+) ms/step", f.read())
        result.update(ms_per_step=float(m.group(1)) if m else None)
    got = wait_steps(port, JOB, row["steps"], timeout=30 if "error" not in result else 5)
    result.update(steps_accounted=got)
    if "error" not in result and got < row["steps"]:
        result.update(error=f"{got} of {row['steps']} steps accounted")
    try:
        for j in sfctl(port, "jobs").get("jobs", []):
            seen.setdefault(j["job"], (0, int(j.get("world_size", 0))))
        result.update(jobs=[dict(job=k, max_ranks_reporting=v[0], world_size=v[1])
                            for k, v in sorted(seen.items())])
        result.update(one_job=list(seen) == [JOB] and seen[JOB] == (row["world"], row["world"]))
        sus = sfctl(port, "suspects", "--job", JOB)
        v = sus["verdict"]
        label, top, candidates = read_verdict(v)
        node = v.get("node", "")
        result.update(label=label, top=top[:2], candidates=candidates[:12], verdict_node=node,
                      sync_group=v.get("sync_group", ""),
                      group_wide=bool(v.get("group_wide", False)),
                      unreliable=v.get("unreliable", []),
                      explanation=v.get("explanation", "")[:300],
                      windows=windows_of(port, row))
        pre = sfctl(port, "steps", "--job", JOB, "--from", "10",
                    "--to", str(FAULT_START - 1))["steps"]
        healthy = statistics.median(int(s["exposed_ns"]) for s in pre) if pre else 0
        result.update(healthy_step_ms=round(healthy / 1e6, 3))
        if row.get("stage") is not None and healthy:
            result.update(magnitude_pct=round(100 * row["fault_ms"] * 1e6 / healthy, 1))
        if row["pattern"] == "control":
            result.update(judge(row, label, top, candidates), node_wrongly_named=bool(node))
        elif row.get("stage") is not None:
            result.update(node_named=node == row["node"] and v["label"] == "CLEAR",
                          node_wrongly_named=bool(node) and node != row["node"])
            # The cheap dashboards over every step (the 40 before the fault are their
            # baseline, as in hidden_rank_eval.py): a stage, never a node.
            dash = sfctl(port, "suspects", "--job", JOB, "--window", str(row["steps"]))
            result.update(mean_points_at=dash.get("mean_top_stage", ""),
                          max_points_at=dash.get("max_top_stage", ""))
        else:
            result.update(healthy=v["label"] == "HEALTHY", node_wrongly_named=bool(node))
    except Exception as e:
        result.setdefault("error", f"reading the verdict: {e}")
    defaults = {"control": ("top1", "top2"), "healthy": ("healthy",)}.get(
        row["pattern"], ("node_named",))
    for k in defaults:
        result.setdefault(k, False)
    stop(procs)
    logs.close()
    return result


def draw(seed, rows, controls, healthy):
    """Node rows, then control rows, then healthy rows; kinds in turn, shuffled."""
    rng = random.Random(seed)
    table = []

    def kinds_for(n):
        ks = (KINDS * n)[:n]
        rng.shuffle(ks)
        return ks

    def faulty(i, kind, pattern_kind, intermittent):
        world = rng.choice(WORLDS[kind])
        stage = rng.choice(FAULT_STAGES[kind])
        frac = rng.uniform(0.04, 0.12)
        every = rng.randint(3, 5) if intermittent else 1
        row = dict(index=i, kind=kind, world=world, nodes=2, steps=STEPS[kind], stage=stage,
                   expect_stage=stage, fault_ms=round(frac * NOMINAL_MS[kind][world], 3),
                   nominal_pct=round(100 * frac, 1),
                   pattern=pattern_kind if pattern_kind == "control" else
                   ("intermittent" if intermittent else "persistent"),
                   intermittent=intermittent, every=every, start=FAULT_START, stop=-1)
        if pattern_kind == "control":
            rank = rng.randrange(world)
            row.update(rank=rank, ranks=[rank], node=f"n{rank // (world // 2)}")
        else:
            n = rng.randrange(2)
            row.update(node=f"n{n}", ranks=node_ranks(row, n))
        return row

    inter = set(rng.sample(range(rows), round(rows / 4)))
    for i, kind in enumerate(kinds_for(rows)):
        table.append(faulty(i, kind, "node", i in inter))
    cinter = set(rng.sample(range(controls), round(controls / 4)))
    for j, kind in enumerate(kinds_for(controls)):
        table.append(faulty(rows + j, kind, "control", j in cinter))
    for j, kind in enumerate(kinds_for(healthy)):
        table.append(dict(index=rows + controls + j, kind=kind, world=rng.choice(WORLDS[kind]),
                          nodes=2, steps=STEPS[kind], stage=None, pattern="healthy"))
    return table


def summarize(results, seed):
    node_rows = [r for r in results if r["pattern"] in ("persistent", "intermittent")]
    controls = [r for r in results if r["pattern"] == "control"]
    healthy = [r for r in results if r["pattern"] == "healthy"]
    lines = [f"node eval, seed {seed}: {len(results)} rows"]

    def named(rs):
        return sum(bool(r.get("node_named")) for r in rs)

    def labels(rs):
        c = collections.Counter(r.get("label", "error") for r in rs)
        return ", ".join(f"{k} {v}" for k, v in c.most_common())

    if node_rows:
        n = len(node_rows)
        lines.append(f"node-wide faults: node named (CLEAR) "
                     f"{sum(bool(r.get('node_named')) for r in node_rows)}/{n}; "
                     f"wrong node {sum(bool(r.get('node_wrongly_named')) for r in node_rows)}")
        for kind in KINDS:
            rs = [r for r in node_rows if r["kind"] == kind]
            if rs:
                pers = [r for r in rs if not r["intermittent"]]
                inter = [r for r in rs if r["intermittent"]]
                lines.append(f"  {kind}: {named(rs)}/{len(rs)} (persistent {named(pers)}/"
                             f"{len(pers)}, intermittent {named(inter)}/{len(inter)})")
        lines.append("  labels: " + labels(node_rows))
        lines.append(f"  dashboards on the same rows (the injected stage, never a node): mean "
                     f"{sum(r.get('mean_points_at') == r['stage'] for r in node_rows)}/{n}, max "
                     f"{sum(r.get('max_points_at') == r['stage'] for r in node_rows)}/{n}")
        nodes = collections.Counter(r.get("verdict_node") or "-" for r in node_rows)
        lines.append("  verdict.node: " + ", ".join(f"{k} {v}" for k, v in nodes.most_common()))
    if controls:
        n = len(controls)
        lines.append(f"controls (one rank): top-1 {sum(bool(r.get('top1')) for r in controls)}/{n}"
                     f", top-2 {sum(bool(r.get('top2')) for r in controls)}/{n}, node wrongly "
                     f"named {sum(bool(r.get('node_wrongly_named')) for r in controls)}/{n}")
        lines.append("  labels: " + labels(controls))
    if healthy:
        windows = [w for r in healthy for w in r.get("windows", [])]
        lines.append(f"healthy runs: {sum(bool(r.get('healthy')) for r in healthy)}/"
                     f"{len(healthy)} HEALTHY at the end; {sum(w == 'HEALTHY' for w in windows)}"
                     f"/{len(windows)} closed windows HEALTHY; node wrongly named "
                     f"{sum(bool(r.get('node_wrongly_named')) for r in healthy)}/{len(healthy)}")
        lines.append("  labels: " + labels(healthy))
    split = [r for r in results if r.get("one_job") is False]
    errors = [r for r in results if "error" in r]
    lines.append(f"rows not one job of all ranks: {len(split)}; error rows: {len(errors)}" +
                 "".join(f"\n  row {r['index']}: {r['error'][:200]}" for r in errors))
    for kind in KINDS:
        secs = [r["seconds"] for r in results if r["kind"] == kind and "seconds" in r]
        if secs:
            lines.append(f"  {kind}: {statistics.median(secs):.0f} s a row (median of "
                         f"{len(secs)})")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=24, help="node-wide fault rows")
    ap.add_argument("--controls", type=int, default=8, help="single-rank fault rows")
    ap.add_argument("--healthy", type=int, default=12, help="healthy rows")
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--out", default="out/node_eval/rows.jsonl",
                    help="rows, one JSON object a line, written as each row finishes")
    ap.add_argument("--work", default="", help="rows' logs (default: next to --out)")
    ap.add_argument("--port", type=int, default=18700, help="the coordinator's gRPC port")
    ap.add_argument("--master-port", type=int, default=29700,
                    help="torchrun --master_port of row 0 (row i: this + i)")
    ap.add_argument("--timeout", type=int, default=400, help="seconds for a row's trainers")
    ap.add_argument("--bin", default="bazel-bin", help="where the built binaries are")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="run only rows of these kinds (the others are drawn, not run)")
    ap.add_argument("--only", default="", help="comma-separated row indices to run")
    ap.add_argument("--only-print", action="store_true",
                    help="print the summary of the rows in --out; run nothing")
    ap.add_argument("--summarize", default="", help="print the summary of this rows file")
    args = ap.parse_args()
    global BIN
    BIN = hidden_rank_eval.BIN = pipeline_eval.BIN = args.bin
    if args.only_print or args.summarize:
        with open(args.summarize or args.out) as f:
            print(summarize([json.loads(line) for line in f if line.strip()], args.seed))
        return 0
    work = args.work or os.path.join(os.path.dirname(os.path.abspath(args.out)), "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    open(args.out, "w").close()
    only = {int(i) for i in args.only.split(",") if i}
    kinds = args.kinds.split(",")
    results = []
    t_all = time.time()
    for row in draw(args.seed, args.rows, args.controls, args.healthy):
        if row["kind"] not in kinds or (only and row["index"] not in only):
            continue
        t0 = time.time()
        res = run_row(row, os.path.join(work, f"row{row['index']:02d}"),
                      args.port + 2 * (row["index"] % 20), args.master_port + row["index"],
                      args.timeout)
        res["seconds"] = round(time.time() - t0, 1)
        results.append(res)
        print(json.dumps(res), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(res) + "\n")
    print(f"wall time: {time.time() - t_all:.0f} s for {len(results)} rows")
    print(summarize(results, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
