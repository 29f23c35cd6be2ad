#!/usr/bin/python3
"""Self-test on a real PyTorch DDP job (documented harness, not a unit test): runs
client/examples/ddp_example.py under the zero-code-change launcher (Gloo, CPU, torchrun) with
the trainers opted in (STAGEFRONTIER_ALLOW_SELFTEST=1), through a real sidecar and coordinator,
and asks the coordinator what a user would ask on their own cluster: `sfctl selftest` for one
probe, then `sfctl selftest --sweep` over the job's stages and some ranks. Prints both answers
and writes them under --out.

    bazel build -c opt //daemon/... //client/examples:synthetic_trainer //client/python:package
    /usr/bin/python3 tests/eval/selftest_ddp.py --bin bazel-bin --world 4 --delay-ms 5 \\
        --out out/selftest_ddp
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hidden_rank_eval as ev  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bazel-bin")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20000, help="trainer steps (stopped when done)")
    ap.add_argument("--delay-ms", type=int, default=5)
    ap.add_argument("--probe-steps", type=int, default=20)
    ap.add_argument("--ranks", default="1,3")
    ap.add_argument("--stages", default="data,forward,backward,optimizer")
    ap.add_argument("--port", type=int, default=47700)
    ap.add_argument("--out", default="out/selftest_ddp")
    args = ap.parse_args()
    ev.BIN = args.bin
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    logs = open(os.path.join(args.out, "daemons.log"), "w")
    procs = ev.start_daemons(args.out, args.port, 1, logs)
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1",
               STAGEFRONTIER_ALLOW_SELFTEST="1")
    row = {"kind": "ddp", "world": args.world, "nodes": 1, "index": 0}
    trainers = ev.trainers_for(row, args.out, args.port, env, logs, steps=args.steps)
    sfctl = [f"{args.bin}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{args.port}",
             "--timeout", "5"]
    delay = ["--delay-ms", str(args.delay_ms), "--steps", str(args.probe_steps), "--wait", "600"]
    try:
        if ev.wait_steps(args.port, "eval", 150, timeout=300) < 150:
            sys.exit("the DDP job never reached 150 accounted steps; see " + args.out)
        health = ev.sfctl(args.port, "health", "--job", "eval")
        one = subprocess.run(sfctl + ["--json", "selftest", "--job", "eval", "--rank",
                                      args.ranks.split(",")[0], "--stage", "backward", *delay],
                             capture_output=True, text=True)
        print(f"== one probe (exit {one.returncode})\n{one.stdout}{one.stderr}")
        sweep = subprocess.run(sfctl + ["selftest", "--job", "eval", "--sweep", "--stages",
                                        args.stages, "--ranks", args.ranks, *delay],
                               capture_output=True, text=True)
        print(f"== sweep (exit {sweep.returncode})\n{sweep.stdout}{sweep.stderr}")
        with open(os.path.join(args.out, "selftest.txt"), "w") as f:
            f.write(one.stdout + one.stderr + "\n" + sweep.stdout + sweep.stderr)
        with open(os.path.join(args.out, "health.json"), "w") as f:
            json.dump(health, f, indent=1)
    finally:
        for t in trainers:
            t.terminate()
        for t in trainers:
            try:
                t.wait(timeout=30)
            except subprocess.TimeoutExpired:
                t.kill()
        ev.stop(procs)
        logs.close()


if __name__ == "__main__":
    main()
