#!/usr/bin/python3
"""The hidden-rank evaluation on real processes (docs/results.md, issue "Diagnostic truth on real
runs"): rows drawn at random with a recorded seed, each run for real through
stub -> sidecar -> coordinator, scored on whether the injected (stage, rank) is the top suspect
(top-1) or among the top two; plus healthy runs, scored on whether the user reading
`sfctl suspects --job J` at the end of the run sees HEALTHY.

Kinds of rows:
  ddp        real PyTorch DDP (Gloo, CPU, torchrun, 2-8 ranks): client/examples/ddp_example.py
             under the zero-code-change launcher (`-m stagefrontier.torch.run`)
  plainddp   real PyTorch DDP, a plain user script without a DataLoader
             (tests/eval/workloads/plain_ddp.py) under the launcher
  torchloop  a loop hand-instrumented through the Python API with a real Gloo all-reduce and
             stage names of its own (tests/eval/workloads/torch_loop.py), 2-8 ranks
  synthetic  16-128 synthetic trainer processes on 1-8 sidecars

A faulty row slows one stage of one hidden rank by 3-100% of the kind's nominal step,
persistently from step 40, intermittently (every 3-10 steps from 40), or in a burst (steps
110-169, then gone again). 200 steps; the verdict is the coordinator's current window at the
end (steps 100-199), read with `sfctl suspects --job J` as a user would. An AMBIGUOUS verdict
counts as a hit only if its candidate ranks contain the injected rank.

    bazel build -c opt //daemon/... //client/examples:synthetic_trainer //client/python:package
    /usr/bin/python3 tests/eval/hidden_rank_eval.py --rows 60 --healthy 20 --seed 20261123 \
        --out out/eval
"""
import argparse
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

BIN = "bazel-bin"
STEPS = 200
NOMINAL_MS = {"synthetic": 27.0, "ddp": 10.0, "plainddp": 10.0, "torchloop": 10.0}
FAULT_STAGES = {
    "synthetic": ["data", "forward", "backward", "optimizer"],
    "ddp": ["data", "forward", "backward", "optimizer"],
    # No DataLoader: the launcher has no data stage to see (the batch is made inside forward's
    # interval), so the plain script's faults are in the stages it can see.
    "plainddp": ["forward", "backward", "optimizer"],
    "torchloop": ["load", "compute", "update"],
}


def sfctl(port, *args):
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "--json", *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def wait_steps(port, job, want, timeout=120):
    deadline = time.time() + timeout
    got = 0
    while time.time() < deadline:
        try:
            jobs = sfctl(port, "jobs").get("jobs", [])
            got = max([int(j["steps_accounted"]) for j in jobs if j["job"] == job] or [0])
            if got >= want:
                return got
        except Exception:
            pass
        time.sleep(0.2)
    return got


def fault_flags(row):
    if row.get("stage") is None:
        return []
    flags = ["--fault", f"{row['stage']}:{row['rank']}:{row['fault_ms']:.3f}",
             "--fault-every", str(row["every"]), "--fault-start", str(row["start"])]
    if row["stop"] >= 0:
        flags += ["--fault-stop", str(row["stop"])]
    return flags


def trainers_for(row, work, port, env, log, steps=STEPS):
    w, kind = row["world"], row["kind"]
    if kind == "synthetic":
        per = w // row["nodes"]
        procs = []
        for r in range(w):
            e = dict(env, STAGEFRONTIER_SHM_DIR=os.path.join(work, f"shm{r // per}"),
                     TORCHELASTIC_RUN_ID="eval", RANK=str(r), LOCAL_RANK=str(r % per),
                     WORLD_SIZE=str(w), LOCAL_WORLD_SIZE=str(per))
            procs.append(subprocess.Popen(
                [f"{BIN}/client/examples/synthetic_trainer", "--steps", str(steps), "--barrier",
                 os.path.join(work, "barrier"), "--seed", str(row["index"] + 1),
                 *fault_flags(row)], env=e, stdout=log, stderr=log))
        return procs
    e = dict(env, STAGEFRONTIER_SHM_DIR=os.path.join(work, "shm0"),
             PYTHONPATH=os.path.abspath(f"{BIN}/client/python"))
    run = ["/usr/bin/python3", "-m", "torch.distributed.run", f"--nproc_per_node={w}",
           f"--master_port={port + 5000}", "--rdzv_id=eval", "--redirects", "2", "--tee", "1",
           "--log_dir", os.path.join(work, "torchrun")]
    script = {"ddp": ["-m", "stagefrontier.torch.run", "client/examples/ddp_example.py"],
              "plainddp": ["-m", "stagefrontier.torch.run",
                           "tests/eval/workloads/plain_ddp.py"],
              "torchloop": ["tests/eval/workloads/torch_loop.py"]}[kind]
    return [subprocess.Popen(run + script + ["--steps", str(steps), *fault_flags(row)], env=e,
                             stdout=log, stderr=log)]


def start_daemons(work, port, nodes, logs, coordinator_flags=(), settle_s=0.0):
    """A coordinator on 127.0.0.1:PORT (journal under WORK/data; COORDINATOR_FLAGS added) and
    NODES sidecars on WORK/shm<n>; returns their processes once the coordinator answers (and
    SETTLE_S more seconds)."""
    procs = []
    coord = subprocess.Popen([f"{BIN}/daemon/coordinator/stagefrontier-coordinator", "--listen",
                              f"127.0.0.1:{port}", "--metrics-listen", "", "--data-dir",
                              os.path.join(work, "data"), "--no-fsync",
                              # The verdicts alone, as every recorded run of this table was.
                              "--no-captures", *coordinator_flags],
                             stdout=logs, stderr=logs)
    procs.append(coord)
    for _ in range(100):
        try:
            sfctl(port, "jobs")
            break
        except Exception:
            time.sleep(0.1)
    for n in range(nodes):
        shm = os.path.join(work, f"shm{n}")
        os.makedirs(shm, exist_ok=True)
        procs.append(subprocess.Popen([f"{BIN}/daemon/sidecar/stagefrontier-sidecar",
                                       "--coordinator", f"127.0.0.1:{port}", "--shm-dir", shm,
                                       "--node", f"n{n}"], stdout=logs, stderr=logs))
    time.sleep(settle_s)
    return procs


def run_row(row, work, port):
    os.makedirs(work, exist_ok=True)
    logs = open(os.path.join(work, "daemons.log"), "w")
    procs = start_daemons(work, port, row["nodes"], logs)
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1")
    trainers = trainers_for(row, work, port, env, logs)
    for t in trainers:
        t.wait(timeout=900)
    got = wait_steps(port, "eval", STEPS)
    result = dict(row, steps_accounted=got)
    try:
        sus = sfctl(port, "suspects", "--job", "eval")
        v = sus["verdict"]
        label, top, candidates = read_verdict(v)
        # Every window the coordinator closed (every 100 steps): the healthy-window rate.
        windows = [w["verdict"]["label"] for w in watch_all(port)]
        pre = sfctl(port, "steps", "--job", "eval", "--from", "10", "--to", "39")["steps"]
        healthy = statistics.median(int(s["exposed_ns"]) for s in pre) if pre else 0
        result.update(label=label, top=top[:2], candidates=candidates[:12],
                      group_wide=bool(v.get("group_wide", False)),
                      unreliable=v.get("unreliable", []), windows=windows,
                      healthy_step_ms=round(healthy / 1e6, 3))
        if row.get("stage") is not None:
            result.update(
                judge(row, label, top, candidates),
                magnitude_pct=round(100 * row["fault_ms"] * 1e6 / healthy, 1) if healthy else None)
            # The dashboards need a healthy baseline: re-account all 200 steps (40 before the
            # fault) for what the mean and max views would point at.
            dash = sfctl(port, "suspects", "--job", "eval", "--window", str(STEPS))
            result.update(mean_points_at=dash.get("mean_top_stage", ""),
                          max_points_at=dash.get("max_top_stage", ""))
    except Exception as e:
        result.update(error=str(e), top1=False, top2=False)
    stop(procs)
    logs.close()
    return result


def stop(procs):
    """SIGTERM in reverse start order (sidecars drain before the coordinator); kill stragglers."""
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def watch_all(port):
    """Every verdict of the job's closed windows."""
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "--json", "--timeout", "5", "watch", "--job", "eval", "--count",
                          str(STEPS // 100)], capture_output=True, text=True, timeout=30)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def draw(seed, rows, healthy):
    rng = random.Random(seed)
    kinds = ["ddp"] * (rows // 3) + ["plainddp"] * (rows // 5) + ["torchloop"] * (rows // 7)
    kinds += ["synthetic"] * (rows - len(kinds))
    rng.shuffle(kinds)
    table = []
    for i, kind in enumerate(kinds):
        world = rng.randint(2, 8) if kind != "synthetic" else rng.choice([16, 32, 64, 128])
        pattern = rng.choice(["persistent", "intermittent", "burst"])
        every = rng.randint(3, 10) if pattern == "intermittent" else 1
        start, stop = (110, 170) if pattern == "burst" else (40, -1)
        stage = rng.choice(FAULT_STAGES[kind])
        frac = rng.uniform(0.03, 1.0)
        table.append(dict(index=i, kind=kind, world=world,
                          nodes=1 if kind != "synthetic" else world // 16, stage=stage,
                          expect_stage=stage, rank=rng.randrange(world),
                          fault_ms=round(frac * NOMINAL_MS[kind], 3),
                          nominal_pct=round(100 * frac, 1), pattern=pattern, every=every,
                          start=start, stop=stop))
    healthy_kinds = (["ddp", "plainddp", "torchloop"] * healthy)[:healthy]
    for j, kind in enumerate(healthy_kinds):
        table.append(dict(index=rows + j, kind=kind, world=rng.randint(2, 8), nodes=1,
                          stage=None, pattern="healthy"))
    return table


def read_verdict(v):
    """(label with its reason, suspects as (stage, rank), candidate ranks) of a verdict as
    `sfctl --json suspects` and `stagefrontier journal --json` print it."""
    label = v["label"] + (" " + v["reason"] if v.get("reason") else "")
    top = [(s["stage"], int(s["rank"])) for s in v.get("suspects", [])]
    return label, top, [int(r) for r in v.get("candidate_ranks", [])]


def judge(row, label, top, candidates):
    """top1/top2 of a faulty row: the injected (stage, rank) first / in the first two suspects,
    and the verdict a hit: not HEALTHY (nothing was reported), and when AMBIGUOUS, its
    candidates hold the injected rank."""
    want = (row["expect_stage"], row["rank"])
    hit = label != "HEALTHY" and (not label.startswith("AMBIGUOUS") or row["rank"] in candidates)
    return dict(top1=bool(top) and top[0] == want and hit, top2=want in top[:2] and hit)

def summarize(results, seed):
    faulty = [r for r in results if r.get("stage") is not None]
    healthy = [r for r in results if r.get("stage") is None]
    lines = []
    n = len(faulty)
    if n:
        top1 = sum(r["top1"] for r in faulty)
        top2 = sum(r["top2"] for r in faulty)
        lines.append(f"faulty rows, seed {seed}: top-1 {top1}/{n}, top-2 {top2}/{n}")
        for kind in ("ddp", "plainddp", "torchloop", "synthetic"):
            rows = [r for r in faulty if r["kind"] == kind]
            if rows:
                lines.append(f"  {kind}: top-1 {sum(r['top1'] for r in rows)}/{len(rows)}, "
                             f"top-2 {sum(r['top2'] for r in rows)}/{len(rows)}")
        labels = collections.Counter(r.get("label", "error") for r in faulty)
        lines.append("  labels: " + ", ".join(f"{k} {v}" for k, v in labels.most_common()))
        mean_ok = sum(r.get("mean_points_at") == r["expect_stage"] for r in faulty)
        max_ok = sum(r.get("max_points_at") == r["expect_stage"] for r in faulty)
        lines.append(f"  dashboards on the same rows: mean points at the injected stage "
                     f"{mean_ok}/{n}, max {max_ok}/{n}")
    if healthy:
        end_ok = sum(r.get("label") == "HEALTHY" for r in healthy)
        windows = [w for r in healthy for w in r.get("windows", [])]
        lines.append(f"healthy runs: {end_ok}/{len(healthy)} HEALTHY at the end of the run; "
                     f"{sum(w == 'HEALTHY' for w in windows)}/{len(windows)} closed windows")
        labels = collections.Counter(r.get("label", "error") for r in healthy)
        lines.append("  labels: " + ", ".join(f"{k} {v}" for k, v in labels.most_common()))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--healthy", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--out", default="out/eval")
    ap.add_argument("--port", type=int, default=18311)
    ap.add_argument("--bin", default="bazel-bin", help="where the built binaries are")
    ap.add_argument("--kinds", default="ddp,plainddp,torchloop,synthetic",
                    help="run only rows of these kinds (the others are drawn, not run)")
    ap.add_argument("--only", default="", help="comma-separated row indices to run")
    ap.add_argument("--summarize", default="", help="only summarize this rows.jsonl")
    args = ap.parse_args()
    global BIN
    BIN = args.bin
    if args.summarize:
        with open(args.summarize) as f:
            print(summarize([json.loads(line) for line in f if line.strip()], args.seed))
        return 0
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    only = {int(i) for i in args.only.split(",") if i}
    results = []
    for row in draw(args.seed, args.rows, args.healthy):
        if row["kind"] not in args.kinds.split(",") or (only and row["index"] not in only):
            continue
        t0 = time.time()
        res = run_row(row, os.path.join(args.out, f"row{row['index']:02d}"),
                      args.port + 2 * (row["index"] % 20))
        res["seconds"] = round(time.time() - t0, 1)
        results.append(res)
        print(json.dumps(res), flush=True)
        with open(os.path.join(args.out, "rows.jsonl"), "a") as f:
            f.write(json.dumps(res) + "\n")
    print(summarize(results, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
