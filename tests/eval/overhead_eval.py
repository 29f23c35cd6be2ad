#!/usr/bin/python3
"""Training-throughput overhead of stagefrontier.torch, measured paired and interleaved:
the example DDP trainer (torchrun, Gloo, CPU) run with and without `-m stagefrontier.torch.run`,
alternating which goes first, a coordinator and a sidecar running throughout. Reports the
throughput ratio with a 95% confidence interval (t over the pairs' log ratios), and the
instrumentation's own cost per step measured directly in-process.

    /usr/bin/python3 tests/eval/overhead_eval.py --pairs 10 --bin bazel-bin
"""
import argparse
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

T975 = {5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179,
        13: 2.160, 14: 2.145, 15: 2.131, 19: 2.093, 20: 2.086}


def run(binary_dir, work, instrumented, ranks, steps, port):
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1",
               STAGEFRONTIER_SHM_DIR=os.path.join(work, "shm"),
               PYTHONPATH=os.path.abspath(os.path.join(binary_dir, "client/python")))
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
           f"--master_port={port}", "--rdzv_id=overhead", "--redirects", "2", "--tee", "1",
           "--log_dir", tempfile.mkdtemp(dir=work)]
    if instrumented:
        cmd += ["-m", "stagefrontier.torch.run"]
    cmd += ["client/examples/ddp_example.py", "--steps", str(steps)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900).stdout
    m = re.search(r"(\d+) steps in ([0-9.]+) s", out)
    if not m:
        raise RuntimeError(f"no timing in: {out[-500:]}")
    return int(m.group(1)) / float(m.group(2))  # steps per second


def hook_cost_us(binary_dir, work):
    """The hooks' own cost per step: a step of the five stages with no work in them."""
    code = r"""
import time, torch, stagefrontier.torch as sft
sf = sft.Instrumentation(job_id="cost", rank=0, local_rank=0, world_size=1, local_world_size=1,
                         shm_dir=%r, ring_capacity=1024, quiet=True)
N = 50000
t0 = time.perf_counter()
for _ in range(N):
    with sf.stage("data"): pass
    with sf.stage("forward"): pass
    sf.mark("backward", time.monotonic_ns())
    sf.mark("grad_sync", time.monotonic_ns())
    with sf.stage("optimizer"): pass
    sf.step_boundary()
print((time.perf_counter() - t0) / N * 1e6)
""" % os.path.join(work, "shm")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(os.path.join(binary_dir, "client/python")))
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    return float(out.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--bin", default="bazel-bin")
    ap.add_argument("--port", type=int, default=18411)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sf_overhead_")
    os.makedirs(os.path.join(work, "shm"))
    logs = open(os.path.join(work, "daemons.log"), "w")
    coord = subprocess.Popen([os.path.join(args.bin, "daemon/coordinator/stagefrontier-coordinator"),
                              "--listen", f"127.0.0.1:{args.port}", "--metrics-listen", "",
                              "--data-dir", os.path.join(work, "data")], stdout=logs, stderr=logs)
    side = subprocess.Popen([os.path.join(args.bin, "daemon/sidecar/stagefrontier-sidecar"),
                             "--coordinator", f"127.0.0.1:{args.port}", "--shm-dir",
                             os.path.join(work, "shm")], stdout=logs, stderr=logs)
    time.sleep(1)
    logr = []
    try:
        for i in range(args.pairs):
            order = [False, True] if i % 2 == 0 else [True, False]
            rate = {}
            for inst in order:
                rate[inst] = run(args.bin, work, inst, args.ranks, args.steps, args.port + 1 + i)
            logr.append(math.log(rate[True] / rate[False]))
            print(f"pair {i}: plain {rate[False]:.1f} steps/s, instrumented {rate[True]:.1f} "
                  f"steps/s, ratio {rate[True] / rate[False]:.4f}", flush=True)
        cost = hook_cost_us(args.bin, work)
    finally:
        for p in (side, coord):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
        logs.close()
        shutil.rmtree(work, ignore_errors=True)
    n = len(logr)
    mean = statistics.mean(logr)
    sd = statistics.stdev(logr) if n > 1 else 0.0
    half = T975.get(n - 1, 2.0) * sd / math.sqrt(n) if n > 1 else float("nan")
    print(f"throughput ratio instrumented/plain over {n} pairs: {math.exp(mean):.4f} "
          f"(95% CI {math.exp(mean - half):.4f} .. {math.exp(mean + half):.4f}); "
          f"overhead {100 * (1 - math.exp(mean)):.2f}% (CI {100 * (1 - math.exp(mean + half)):.2f}% "
          f".. {100 * (1 - math.exp(mean - half)):.2f}%)")
    print(f"instrumentation cost per step (5 stages, hooks only, in-process): {cost:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
