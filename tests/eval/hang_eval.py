#!/usr/bin/python3
"""The hang evaluation on real processes (issue "Hangs", deliverable 5; a documented harness,
not a unit test). One coordinator and one sidecar; each row starts a real Gloo job (2-8 ranks,
one process each, as torchrun's workers: RANK, WORLD_SIZE, MASTER_ADDR...) that stops in a
known way, and polls `sfctl suspects` until the job reads STALLED:

  * hang rows: a rank stuck in an io, compute or sync stage (inside an all-reduce the others
    finished), killed with SIGKILL mid-step, ending on an uncaught exception mid-step (the
    others' collective then fails too), stuck before a send/recv in a pipeline job, or
    calling another collective than its peers (a desync); on the explicit Python API
    (tests/eval/workloads/hang_loop.py) and plain DDP under stagefrontier.torch.run
    (client/examples/ddp_example.py). A row passes when the verdict names the expected reason
    and (stage, rank, step); its latency is from the moment the rank stopped (the workload
    prints it) to the first STALLED reply.
  * control rows: healthy runs, 1-2 s hiccups, a 20 s checkpoint on every rank, an evaluation
    pass between steps. A row passes when the job finished with no stall alarm (a group-wide
    pause reported without alarm is right).

With --seed S, each hang row's rank and step are drawn (rank uniform in the job, step in
[60, 200]; a desync's rank is never 0, the broadcast's root) from random.Random(S * 1000 + row); without it, the fixed list below. For each hang
row it also reads the evidence the coordinator asked at the stall (`sfctl captures`, then
`sfctl capture-report`): whether the stuck rank's stacks came and show the workload's own frame
(where it sleeps), and whether a waiting rank's came.

    bazel build -c opt //daemon/... //client/python:package
    /usr/bin/python3 tests/eval/hang_eval.py --bin bazel-bin --out out/hang_eval [--seed S] [--rows 0,5]

Prints one line per row and the summary; writes rows.json under --out.
"""
import argparse
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

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "workloads", "hang_loop.py")
DDP = os.path.join(HERE, "..", "..", "client", "examples", "ddp_example.py")

# (name, workload, world, flags, expected): expected (reason, rank, stage, step) for a hang row,
# None for a control.
HANGS = [
    ("io hang, API", "loop", 3, ["--hang", "load:1:120"], ("hung", 1, "load", 120)),
    ("compute hang, API", "loop", 3, ["--hang", "compute:0:150"], ("hung", 0, "compute", 150)),
    ("compute hang, API, 2", "loop", 2, ["--hang", "compute:1:90"], ("hung", 1, "compute", 90)),
    ("compute hang, API, 4", "loop", 4, ["--hang", "compute:3:200"], ("hung", 3, "compute", 200)),
    ("compute hang, API, 6", "loop", 6, ["--hang", "compute:4:110"], ("hung", 4, "compute", 110)),
    ("compute hang, API, 8", "loop", 8, ["--hang", "compute:5:80"], ("hung", 5, "compute", 80)),
    ("update hang, API", "loop", 3, ["--hang", "update:2:130"], ("hung", 2, "update", 130)),
    ("update hang, API, 5", "loop", 5, ["--hang", "update:0:100"], ("hung", 0, "update", 100)),
    ("io hang, API, 4", "loop", 4, ["--hang", "load:2:170"], ("hung", 2, "load", 170)),
    ("io hang, API, 8", "loop", 8, ["--hang", "load:7:60"], ("hung", 7, "load", 60)),
    ("in a finished collective, API", "loop", 3, ["--hang", "allreduce:1:140"],
     ("hung", 1, "allreduce", 140)),
    ("in a finished collective, API, 4", "loop", 4, ["--hang", "allreduce:0:100"],
     ("hung", 0, "allreduce", 100)),
    ("in a finished collective, API, 2", "loop", 2, ["--hang", "allreduce:1:75"],
     ("hung", 1, "allreduce", 75)),
    ("SIGKILL in compute, API", "loop", 3, ["--die", "compute:2:120"], ("dead", 2, "compute", 120)),
    ("SIGKILL in io, API, 4", "loop", 4, ["--die", "load:1:90"], ("dead", 1, "load", 90)),
    ("SIGKILL in update, API, 2", "loop", 2, ["--die", "update:0:150"], ("dead", 0, "update", 150)),
    ("SIGKILL in compute, API, 6", "loop", 6, ["--die", "compute:5:70"], ("dead", 5, "compute", 70)),
    ("pipeline, stuck before send", "loop", 2, ["--pipeline", "--hang", "fwd:0:100"],
     ("hung", 0, "fwd", 100)),
    ("pipeline, stuck before send, 4", "loop", 4, ["--pipeline", "--hang", "fwd:2:120"],
     ("hung", 2, "fwd", 120)),
    ("pipeline, stuck in bwd, 4", "loop", 4, ["--pipeline", "--hang", "bwd:1:90"],
     ("hung", 1, "bwd", 90)),
    ("desync, API", "loop", 3, ["--desync", "2:100"], ("desync", 2, "bcast", 100)),
    ("desync, API, 4", "loop", 4, ["--desync", "1:130"], ("desync", 1, "bcast", 130)),
    ("DDP forward hang", "ddp", 3, ["--hang", "forward:0:150"], ("hung", 0, "forward", 150)),
    ("DDP forward hang, 2", "ddp", 2, ["--hang", "forward:1:100"], ("hung", 1, "forward", 100)),
    ("DDP forward hang, 4", "ddp", 4, ["--hang", "forward:2:120"], ("hung", 2, "forward", 120)),
    ("DDP data hang", "ddp", 3, ["--hang", "data:1:110"], ("hung", 1, "data", 110)),
    ("DDP data hang, 5", "ddp", 5, ["--hang", "data:4:90"], ("hung", 4, "data", 90)),
    ("DDP optimizer hang", "ddp", 3, ["--hang", "optimizer:2:130"],
     ("hung", 2, "optimizer", 130)),
    ("DDP backward hang", "ddp", 3, ["--hang", "backward:1:140"], ("hung", 1, "backward", 140)),
    ("DDP SIGKILL in backward", "ddp", 3, ["--die", "backward:1:100"],
     ("dead", 1, "backward", 100)),
    ("DDP SIGKILL in forward, 4", "ddp", 4, ["--die", "forward:3:80"], ("dead", 3, "forward", 80)),
    ("DDP SIGKILL in data, 2", "ddp", 2, ["--die", "data:0:120"], ("dead", 0, "data", 120)),
    ("uncaught exception in compute, API", "loop", 3, ["--raise", "compute:1:110"],
     ("dead", 1, "compute", 110)),
    ("uncaught exception in load, API, 4", "loop", 4, ["--raise", "load:3:80"],
     ("dead", 3, "load", 80)),
    ("uncaught exception in update, API, 2", "loop", 2, ["--raise", "update:0:130"],
     ("dead", 0, "update", 130)),
    ("DDP uncaught exception in forward", "ddp", 3, ["--raise", "forward:2:100"],
     ("dead", 2, "forward", 100)),
    ("DDP uncaught exception in data, 4", "ddp", 4, ["--raise", "data:1:90"],
     ("dead", 1, "data", 90)),
]
CONTROLS = [
    ("healthy, API", "loop", 3, ["--steps", "600"]),
    ("healthy, API, 8", "loop", 8, ["--steps", "300"]),
    ("healthy, DDP", "ddp", 3, ["--steps", "600"]),
    ("healthy, DDP, 2", "ddp", 2, ["--steps", "600"]),
    ("healthy pipeline, 4", "loop", 4, ["--pipeline", "--steps", "500"]),
    ("1 s hiccup, API", "loop", 3, ["--steps", "400", "--hiccup", "1:150:1"]),
    ("2 s hiccup, API, 4", "loop", 4, ["--steps", "400", "--hiccup", "2:200:2"]),
    ("1.5 s hiccup, DDP", "ddp", 3, ["--steps", "400", "--fault", "data:1:1500:100000:150"]),
    ("2 s hiccup, DDP, 2", "ddp", 2, ["--steps", "400", "--fault", "forward:0:2000:100000:120"]),
    ("20 s checkpoint, API", "loop", 3, ["--steps", "300", "--pause", "100:20"]),
    ("20 s checkpoint, API, 6", "loop", 6, ["--steps", "200", "--pause", "80:20"]),
    ("20 s checkpoint, DDP", "ddp", 3, ["--steps", "300", "--pause", "100:20"]),
    ("15 s evaluation pass, API", "loop", 3, ["--steps", "300", "--eval", "120:15"]),
    ("15 s evaluation pass, API, 4", "loop", 4, ["--steps", "300", "--eval", "150:15"]),
    ("20 s checkpoint, DDP, 4", "ddp", 4, ["--steps", "300", "--pause", "120:20"]),
]


def drawn(rows, seed):
    """The hang rows with each rank and step drawn from `seed` (see the module's doc)."""
    out = []
    for i, (name, workload, world, flags, (reason, rank, stage, step)) in enumerate(rows):
        rng = random.Random(seed * 1000 + i)
        rank, step = rng.randrange(world), rng.randint(60, 200)
        flags = list(flags)
        k = next(j for j, f in enumerate(flags)
                 if f in ("--hang", "--die", "--raise", "--desync"))
        fields = flags[k + 1].split(":")
        if flags[k] == "--desync":
            # Not rank 0: the broadcast's root would send and go on, a desync that never
            # blocks (Gloo buffers the root's sends).
            rank = 1 + rng.randrange(world - 1)
            fields = [str(rank), str(step)]
        else:
            fields[1], fields[2] = str(rank), str(step)
        flags[k + 1] = ":".join(fields)
        out.append((name, workload, world, flags, (reason, rank, stage, step)))
    return out


def stacks_evidence(port, job, stuck_rank, workload):
    """What the stack capture asked at the stall shows: the stuck rank's stacks (with a frame of
    the workload's own file) and a waiting rank's."""
    t0 = time.time()
    ids = []
    while time.time() < t0 + 20 and not ids:
        try:
            ids = [d["id"] for d in sfctl(port, "captures", "--job", job).get("decisions", [])
                   if d.get("kind") == "stacks" and d.get("asked")]
        except Exception:
            pass
        if not ids:
            time.sleep(0.5)
    if not ids:
        return {"asked": False}
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "capture-report", "--job", job, "--capture", str(ids[0]), "--wait",
                          "40"], capture_output=True, text=True, timeout=60)
    sections = re.split(r"^== rank (\d+) ", out.stdout, flags=re.M)[1:]
    by_rank = {int(sections[k]): sections[k + 1] for k in range(0, len(sections) - 1, 2)}
    own = os.path.basename(LOOP if workload == "loop" else DDP)
    stuck = by_rank.get(stuck_rank, "")
    waiting = [t for r, t in by_rank.items() if r != stuck_rank]
    return {"asked": True, "report_s": round(time.time() - t0, 1),
            "stuck_asked": stuck_rank in by_rank,
            "stuck_stacks": 'File "' in stuck,
            "stuck_own_frame": f'{own}", line' in stuck,
            "waiting_stacks": any('File "' in t for t in waiting)}


def sfctl(port, *args, timeout=30):
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "--json", *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def start_job(job, workload, world, flags, shm, work, port):
    procs = []
    for r in range(world):
        env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1",
                   STAGEFRONTIER_SHM_DIR=shm, TORCHELASTIC_RUN_ID=job, RANK=str(r),
                   LOCAL_RANK=str(r), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   PYTHONPATH=os.path.abspath(f"{BIN}/client/python"))
        if workload == "loop":
            cmd = ["/usr/bin/python3", LOOP, *flags]
        else:
            cmd = ["/usr/bin/python3", "-m", "stagefrontier.torch.run", DDP, *flags]
        if "--steps" not in flags:
            cmd += ["--steps", "1000"]
        log = open(os.path.join(work, f"{job}-rank{r}.log"), "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    return procs


def kill(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()


def event_time(work, job, world):
    for r in range(world):
        try:
            for line in open(os.path.join(work, f"{job}-rank{r}.log")):
                m = re.match(r"EVENT ([0-9.]+)", line)
                if m:
                    return float(m.group(1))
        except FileNotFoundError:
            pass
    return None


def run_hang(i, row, work, port):
    name, workload, world, flags, (reason, rank, stage, step) = row
    job = f"h{i:02d}"
    procs = start_job(job, workload, world, flags, os.path.join(work, "shm"), work, port + 100 + i)
    t_event, verdict, t_verdict = None, None, None
    deadline = time.time() + 240
    while time.time() < deadline:
        if t_event is None:
            t_event = event_time(work, job, world)
            if t_event is None:
                time.sleep(0.2)
                continue
            deadline = t_event + 60
        try:
            reply = sfctl(port, "suspects", "--job", job)
        except Exception:
            reply = {}
        v = reply.get("verdict", {}) if isinstance(reply, dict) else {}
        if v.get("label") == "STALLED" and v.get("stall", {}).get("alarm"):
            verdict, t_verdict = v, time.time()
            break
        time.sleep(0.2)
    out = {"row": name, "world": world, "workload": workload, "expected": [reason, rank, stage,
                                                                          step]}
    if verdict is None:
        kill(procs)
        out.update(ok=False, got="no STALLED verdict" if t_event else "the workload never stopped")
        return out
    out["stacks"] = stacks_evidence(port, job, rank, workload)
    kill(procs)
    stall = verdict["stall"]
    named = [r for r in stall.get("ranks", []) if r.get("role") in ("stuck", "dead")]
    first = named[0] if named else {}
    got = [stall.get("reason"), first.get("rank", 0) if named else None, first.get("stage", ""),
           int(first.get("step", 0)) if named else None]
    if reason == "desync":
        # Every rank waits; the one in the other collective is the one in stage `stage`.
        others = [r for r in stall.get("ranks", []) if r.get("stage") == stage]
        got = [stall.get("reason"), others[0].get("rank", 0) if len(others) == 1 else None, stage,
               int(others[0].get("step", 0)) if len(others) == 1 else None]
    out.update(ok=got == [reason, rank, stage, step], got=got, text=stall.get("text", ""),
               latency_s=round(t_verdict - t_event, 2),
               named=len(named))
    return out


def run_control(i, row, work, port):
    name, workload, world, flags = row
    job = f"c{i:02d}"
    procs = start_job(job, workload, world, flags, os.path.join(work, "shm"), work, port + 300 + i)
    alarms, seen = [], set()
    deadline = time.time() + 300
    while time.time() < deadline and any(p.poll() is None for p in procs):
        try:
            v = sfctl(port, "suspects", "--job", job).get("verdict", {})
        except Exception:
            v = {}
        if v.get("label") == "STALLED":
            seen.add(v["stall"]["reason"] + ("" if v["stall"].get("alarm") else " (no alarm)"))
            if v["stall"].get("alarm"):
                alarms.append(v["stall"].get("text", ""))
        time.sleep(0.5)
    finished = all(p.poll() == 0 for p in procs)
    kill(procs)
    return {"row": name, "world": world, "workload": workload, "ok": finished and not alarms,
            "finished": finished, "alarms": alarms, "stalls_seen": sorted(seen)}


def main():
    global BIN
    a = argparse.ArgumentParser()
    a.add_argument("--bin", default="bazel-bin")
    a.add_argument("--out", default="out/hang_eval")
    a.add_argument("--port", type=int, default=17801)
    a.add_argument("--rows", default="", help="comma-separated row numbers (hangs, then controls)")
    a.add_argument("--seed", type=int, default=None, help="draw each hang row's rank and step")
    args = a.parse_args()
    BIN = args.bin
    work = os.path.abspath(args.out)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "shm"))
    logs = open(os.path.join(work, "daemons.log"), "w")
    coord = subprocess.Popen(
        [f"{BIN}/daemon/coordinator/stagefrontier-coordinator", "--listen",
         f"127.0.0.1:{args.port}", "--metrics-listen", "", "--data-dir",
         os.path.join(work, "data"), "--no-fsync", "--max-jobs", "200"],
        stdout=logs, stderr=logs)
    side = subprocess.Popen(
        [f"{BIN}/daemon/sidecar/stagefrontier-sidecar", "--coordinator",
         f"127.0.0.1:{args.port}", "--shm-dir", os.path.join(work, "shm"), "--node", "n0"],
        stdout=logs, stderr=logs)
    time.sleep(1)
    hangs = HANGS if args.seed is None else drawn(HANGS, args.seed)
    rows = [("hang", i, r) for i, r in enumerate(hangs)] + \
        [("control", i, r) for i, r in enumerate(CONTROLS)]
    if args.rows:
        keep = {int(x) for x in args.rows.split(",")}
        rows = [r for k, r in enumerate(rows) if k in keep]
    results = []
    try:
        for kind, i, row in rows:
            r = run_hang(i, row, work, args.port) if kind == "hang" else \
                run_control(i, row, work, args.port)
            r["kind"] = kind
            results.append(r)
            print(json.dumps(r), flush=True)
    finally:
        side.terminate()
        coord.terminate()
        side.wait()
        coord.wait()
    hangs = [r for r in results if r["kind"] == "hang"]
    controls = [r for r in results if r["kind"] == "control"]
    lat = [r["latency_s"] for r in hangs if "latency_s" in r]
    dead = [r for r in hangs if r["expected"][0] == "dead"]
    print(f"hang rows: {sum(r['ok'] for r in hangs)}/{len(hangs)} named right; "
          f"stall to verdict median {statistics.median(lat) if lat else float('nan'):.1f} s, "
          f"max {max(lat) if lat else float('nan'):.1f} s; dead told from stuck "
          f"{sum(r['ok'] for r in dead)}/{len(dead)}")
    st = [r["stacks"] for r in hangs if "stacks" in r]
    alive = [r["stacks"] for r in hangs if "stacks" in r and r["expected"][0] != "dead"]
    print(f"stacks: asked at {sum(s['asked'] for s in st)}/{len(st)} stalls; the stuck rank's "
          f"with its own frame {sum(s.get('stuck_own_frame', False) for s in alive)}/{len(alive)} "
          f"(stuck rank alive); a waiting rank's {sum(s.get('waiting_stacks', False) for s in st)}"
          f"/{len(st)}; report within median "
          f"{statistics.median([s['report_s'] for s in st if 'report_s' in s] or [float('nan')]):.1f}"
          f" s of the verdict")
    if args.seed is not None:
        print(f"seed {args.seed}")
    print(f"control rows: {sum(r['ok'] for r in controls)}/{len(controls)} without a stall "
          f"alarm; {sum(len(r['alarms']) for r in controls)} alarms")
    json.dump(results, open(os.path.join(work, "rows.json"), "w"), indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
