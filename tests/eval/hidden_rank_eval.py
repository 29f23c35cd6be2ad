#!/usr/bin/python3
"""The hidden-rank evaluation (SPEC §3, issue "PyTorch integration"): rows drawn at random
with a recorded seed, each run for real through stub -> sidecar -> coordinator, and scored
on whether the injected (stage, rank) is the top suspect (top-1) or among the top two.

Rows: world size 2-8 real PyTorch DDP ranks (Gloo, CPU, torchrun, the example trainer under
`-m stagefrontier.torch.run`) or 16-128 synthetic trainer processes; a random stage (data,
forward, backward, optimizer) and rank; a magnitude of 5-100% of the healthy step; the fault
persistent or every 4th step, from step 40. The verdict is read over steps 100-199.

    bazel build -c opt //daemon/... //client/examples:synthetic_trainer //client/python:package
    /usr/bin/python3 tests/eval/hidden_rank_eval.py --rows 50 --seed 20261122 --out out/eval
    # only the PyTorch rows of the same draw:  ... --kinds ddp --out out/eval_ddp
"""
import argparse
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
STAGES = ["data", "forward", "backward", "optimizer"]
SYNTH_MS = {"data": 4, "forward": 8, "backward": 12, "optimizer": 3}


def sfctl(port, *args):
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "--json", *args], capture_output=True, text=True, timeout=30)
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


def run_row(row, work, port):
    os.makedirs(work, exist_ok=True)
    procs = []
    logs = open(os.path.join(work, "daemons.log"), "w")
    coord = subprocess.Popen([f"{BIN}/daemon/coordinator/stagefrontier-coordinator", "--listen",
                              f"127.0.0.1:{port}", "--metrics-listen", "", "--data-dir",
                              os.path.join(work, "data"), "--no-fsync"],
                             stdout=logs, stderr=logs)
    procs.append(coord)
    for _ in range(100):
        try:
            sfctl(port, "jobs")
            break
        except Exception:
            time.sleep(0.1)
    w, nodes = row["world"], row["nodes"]
    per = w // nodes
    for n in range(nodes):
        shm = os.path.join(work, f"shm{n}")
        os.makedirs(shm, exist_ok=True)
        procs.append(subprocess.Popen([f"{BIN}/daemon/sidecar/stagefrontier-sidecar",
                                       "--coordinator", f"127.0.0.1:{port}", "--shm-dir", shm,
                                       "--node", f"n{n}"], stdout=logs, stderr=logs))
    fault = f"{row['stage']}:{row['rank']}:{row['fault_ms']:.3f}"
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1")
    steps = 200
    if row["kind"] == "ddp":
        env.update(STAGEFRONTIER_SHM_DIR=os.path.join(work, "shm0"),
                   PYTHONPATH=os.path.abspath(f"{BIN}/client/python"))
        cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", f"--nproc_per_node={w}",
               f"--master_port={port + 5000}", "--rdzv_id=eval", "--redirects", "2", "--tee",
               "1", "--log_dir", os.path.join(work, "torchrun"), "-m",
               "stagefrontier.torch.run", "client/examples/ddp_example.py", "--steps",
               str(steps), "--fault", fault, "--fault-every", str(row["every"]),
               "--fault-start", "40"]
        trainers = [subprocess.Popen(cmd, env=env, stdout=logs, stderr=logs)]
    else:
        trainers = []
        barrier = os.path.join(work, "barrier")
        for r in range(w):
            e = dict(env, STAGEFRONTIER_SHM_DIR=os.path.join(work, f"shm{r // per}"),
                     TORCHELASTIC_RUN_ID="eval", RANK=str(r), LOCAL_RANK=str(r % per),
                     WORLD_SIZE=str(w), LOCAL_WORLD_SIZE=str(per))
            trainers.append(subprocess.Popen(
                [f"{BIN}/client/examples/synthetic_trainer", "--steps", str(steps), "--barrier",
                 barrier, "--fault", fault, "--fault-every", str(row["every"]),
                 "--fault-start", "40", "--seed", str(row["index"] + 1)],
                env=e, stdout=logs, stderr=logs))
    for t in trainers:
        t.wait(timeout=600)
    got = wait_steps(port, "eval", steps)
    result = dict(row, steps_accounted=got)
    try:
        sus = sfctl(port, "suspects", "--job", "eval")
        # The dashboards need a healthy baseline: re-account all 200 steps (40 before the
        # fault) for what the mean and max views would point at.
        dash = sfctl(port, "suspects", "--job", "eval", "--window", "200")
        pre = sfctl(port, "steps", "--job", "eval", "--from", "10", "--to", "39")["steps"]
        healthy = statistics.median(int(s["exposed_ns"]) for s in pre) if pre else 0
        v = sus["verdict"]
        top = [(s["stage"], int(s["rank"])) for s in v.get("suspects", [])]
        want = (row["stage"], row["rank"])
        result.update(label=v["label"] + (" " + v["reason"] if v.get("reason") else ""),
                      top=top[:2], top1=bool(top) and top[0] == want, top2=want in top[:2],
                      healthy_step_ms=healthy / 1e6,
                      magnitude_pct=100 * row["fault_ms"] * 1e6 / healthy if healthy else None,
                      mean_points_at=dash.get("mean_top_stage", ""),
                      max_points_at=dash.get("max_top_stage", ""))
    except Exception as e:
        result.update(error=str(e), top1=False, top2=False)
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    logs.close()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--out", default="out/eval")
    ap.add_argument("--port", type=int, default=18311)
    ap.add_argument("--bin", default="bazel-bin", help="where the built binaries are")
    ap.add_argument("--kinds", default="ddp,synthetic",
                    help="run only rows of these kinds (the others are drawn, not run), e.g. "
                         "ddp to re-run the PyTorch rows after a change to stagefrontier.torch")
    args = ap.parse_args()
    global BIN
    BIN = args.bin
    rng = random.Random(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    results = []
    for i in range(args.rows):
        kind = "ddp" if rng.random() < 0.5 else "synthetic"
        world = rng.randint(2, 8) if kind == "ddp" else rng.choice([16, 32, 64, 128])
        # Magnitude: 5-100% of a nominal step (synthetic: 27 ms of stage work; DDP: measured
        # after the fact as the share of the healthy exposed step).
        frac = rng.uniform(0.05, 1.0)
        nominal = 27.0 if kind == "synthetic" else 20.0
        row = dict(index=i, kind=kind, world=world, nodes=1 if kind == "ddp" else world // 16,
                   stage=rng.choice(STAGES), rank=rng.randrange(world),
                   fault_ms=round(frac * nominal, 3), every=rng.choice([1, 4]))
        if kind not in args.kinds.split(","):
            continue
        t0 = time.time()
        res = run_row(row, os.path.join(args.out, f"row{i:02d}"), args.port + 2 * (i % 20))
        res["seconds"] = round(time.time() - t0, 1)
        results.append(res)
        print(json.dumps(res), flush=True)
        with open(os.path.join(args.out, "rows.jsonl"), "a") as f:
            f.write(json.dumps(res) + "\n")
    n = len(results)
    top1 = sum(r["top1"] for r in results)
    top2 = sum(r["top2"] for r in results)
    mean_ok = sum(r.get("mean_points_at") == r["stage"] for r in results)
    max_ok = sum(r.get("max_points_at") == r["stage"] for r in results)
    print(f"hidden-rank evaluation, seed {args.seed}: top-1 {top1}/{n}, top-2 {top2}/{n}; "
          f"mean dashboard right stage {mean_ok}/{n}, max dashboard {max_ok}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
