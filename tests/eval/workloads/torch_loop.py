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

STAGES = [("load", "io"), ("compute", "compute"), ("allreduce", "sync"), ("update", "compute")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--fault", default="", help="STAGE:RANK:MS with STAGE one of load, compute, update")
    p.add_argument("--fault-every", type=int, default=1)
    p.add_argument("--fault-start", type=int, default=0)
    p.add_argument("--fault-stop", type=int, default=-1)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stage, fault_rank, fault_ms = None, -1, 0.0
    if args.fault:
        stage, r, ms = args.fault.split(":")
        fault_rank, fault_ms = int(r), float(ms)

    def slow(name, step):
        if name == stage and rank == fault_rank and step >= args.fault_start and \
                (args.fault_stop < 0 or step < args.fault_stop) and \
                (args.fault_every <= 1 or (step - args.fault_start) % args.fault_every == 0):
            time.sleep(fault_ms / 1000)

    c = stagefrontier.Client(stages=STAGES)
    w = torch.randn(256, 256)
    g = torch.Generator().manual_seed(rank)
    start = time.monotonic()
    for step in range(args.steps):
        c.begin_step(step)
        with c.stage("load"):
            slow("load", step)
            x = torch.randn(64, 256, generator=g)
        with c.stage("compute"):
            slow("compute", step)
            grad = (x @ w).relu().t() @ x
        with c.stage("allreduce"):
            dist.all_reduce(grad)
        with c.stage("update"):
            slow("update", step)
            w -= 1e-6 * grad
        c.end_step()
    if rank == 0:
        ms = 1000 * (time.monotonic() - start) / max(1, args.steps)
        print(f"torch_loop: {args.steps} steps, {ms:.2f} ms/step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
