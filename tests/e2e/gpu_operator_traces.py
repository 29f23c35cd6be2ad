#!/usr/bin/env python3
"""Captures on a GPU, for the operator comparison (`stagefrontier compare-ops`) on real Kineto
traces with CUDA kernels: one process per "rank", an MLP on the GPU, steps marked as the torch
launcher marks them (ProfilerStep#N from the capture, "stagefrontier:<stage>" ranges), steps
FIRST..FIRST+4 captured by the stub's own TraceCapture. The suspect rank's forward does extra
matrix products worth about MS milliseconds of GPU time, as a slower module would.

    python3 tests/e2e/gpu_operator_traces.py --rank 1 --matmul-ms 5 --out DIR [--sync]

--sync waits for the GPU at the end of each stage (the stage then holds its kernels' time);
without it the forward only launches its kernels and the wait lands where the CPU next blocks,
as in most real trainers. Run by tests/bench/gpu_machine_run.sh (docs/results.md).
"""
import argparse
import os
import sys
import time

# After PYTHONPATH: gpu_machine_run.sh puts a module built for that python3 there.
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "..", "client", "python", "src"))

import torch  # noqa: E402
from torch.autograd.profiler import record_function  # noqa: E402

from stagefrontier.torch.capture import TraceCapture  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--matmul-ms", type=float, default=0.0, help="extra forward GPU time")
    p.add_argument("--out", required=True)
    p.add_argument("--sync", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--first", type=int, default=20, help="first captured step")
    args = p.parse_args()
    dev = "cuda"
    torch.manual_seed(7)
    hidden = 4096
    model = torch.nn.Sequential(torch.nn.Linear(1024, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    extra = torch.randn(hidden, hidden, device=dev) / hidden ** 0.5
    products = 0
    if args.matmul_ms > 0:
        m = torch.randn(256, hidden, device=dev)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(200):
            m = m @ extra
        torch.cuda.synchronize()
        products = max(1, round(args.matmul_ms / 1000 / ((time.perf_counter() - start) / 200)))
    capture = TraceCapture(args.rank, directory=args.out)

    def stage(name):
        return record_function("stagefrontier:" + name)

    def sync():
        if args.sync:
            torch.cuda.synchronize()

    for step in range(1, args.steps + 1):
        capture.on_step_begin(step, args.first <= step < args.first + 5)
        with stage("data"):
            x = torch.randn(256, 1024, device=dev)
            y = x.sum(dim=1, keepdim=True)
            sync()
        with stage("forward"):
            out = model(x)
            if products:
                with torch.no_grad():
                    m = torch.ones(256, hidden, device=dev)
                    for _ in range(products):
                        m = m @ extra
            loss = torch.nn.functional.mse_loss(out, y)
            sync()
        with stage("backward"):
            loss.backward()
            sync()
        with stage("optimizer"):
            opt.step()
            opt.zero_grad()
            loss_value = loss.item()  # the CPU waits for the GPU here at the latest
        capture.on_step_end()
    capture.finish()
    print(f"gpu_operator_traces: rank {args.rank} products {products} loss {loss_value:.3f} "
          f"captures {capture.summary()}", flush=True)
    return 0 if capture.done else 1


if __name__ == "__main__":
    sys.exit(main())
