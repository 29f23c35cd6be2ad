#!/usr/bin/python3
"""A hand-instrumented training loop on the explicit Python API, with a real Gloo all-reduce
(torch.distributed, no DDP), for the evaluation: stages load (io), compute (compute),
allreduce (sync), update (compute) — names of its own, not the launcher's.

    torchrun --nproc_per_node 4 tests/eval/workloads/torch_loop.py --steps 200 \
        --fault compute:2:4 --fault-start 40
"""
import argparse
import time

import torch
import torch.distributed as dist

import stagefrontier
from fault_schedule import Fault, add_fault_args

STAGES = [("load", "io"), ("compute", "compute"), ("allreduce", "sync"), ("update", "compute")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    add_fault_args(p, " with STAGE one of load, compute, update")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    fault = Fault.from_args(args, rank)

    c = stagefrontier.Client(stages=STAGES)
    w = torch.randn(256, 256)
    g = torch.Generator().manual_seed(rank)
    start = time.monotonic()
    for step in range(args.steps):
        c.begin_step(step)
        fault.step = step
        with c.stage("load"):
            fault.hit("load")
            x = torch.randn(64, 256, generator=g)
        with c.stage("compute"):
            fault.hit("compute")
            grad = (x @ w).relu().t() @ x
        with c.stage("allreduce"):
            dist.all_reduce(grad)
        with c.stage("update"):
            fault.hit("update")
            w -= 1e-6 * grad
        c.end_step()
    if rank == 0:
        ms = 1000 * (time.monotonic() - start) / max(1, args.steps)
        print(f"torch_loop: {args.steps} steps, {ms:.2f} ms/step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
