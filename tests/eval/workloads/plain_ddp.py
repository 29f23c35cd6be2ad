#!/usr/bin/python3
"""A plain DDP training script as users write them, for the evaluation: no DataLoader (the
batch is made inline), zero_grad / forward / backward / step, a small convolutional model.
It knows nothing of StageFrontier: run it under the zero-code-change launcher.

    torchrun --nproc_per_node 4 -m stagefrontier.torch.run tests/eval/workloads/plain_ddp.py \
        --steps 200 --fault optimizer:1:5 --fault-start 40

Faults: data (making the batch), forward (inside the model), backward (a gradient hook),
optimizer (inside Optimizer.step) slowed by MS milliseconds on RANK, every EVERY steps from
START until STOP.
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from fault_schedule import Fault, add_fault_args


class Net(torch.nn.Module):
    def __init__(self, fault):
        super().__init__()
        self.fault = fault
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        self.fault.hit("forward")
        return self.head(torch.relu(self.conv(x)).flatten(1))


class SlowSGD(torch.optim.SGD):
    fault = None

    def step(self, closure=None):
        SlowSGD.fault.hit("optimizer")
        return super().step(closure)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=16)
    add_fault_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    fault = Fault.from_args(args, rank)
    model = DDP(Net(fault))
    model.module.conv.weight.register_hook(lambda g: (fault.hit("backward"), g)[1])
    SlowSGD.fault = fault
    opt = SlowSGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(rank)
    start = time.monotonic()
    for step in range(args.steps):
        fault.step = step
        fault.hit("data")
        x = torch.randn(args.batch, 3, 16, 16, generator=g)
        y = torch.randint(0, 10, (args.batch,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    if rank == 0:
        ms = 1000 * (time.monotonic() - start) / max(1, args.steps)
        print(f"plain_ddp: {args.steps} steps, {ms:.2f} ms/step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
