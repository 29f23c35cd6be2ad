#!/usr/bin/python3
"""A small DDP trainer (an MLP on synthetic data, CPU, Gloo) with fault injection, for the
PyTorch demo, the end-to-end test and the evaluation. It knows nothing of StageFrontier:
run it under the launcher to instrument it.

    torchrun --nproc_per_node 4 -m stagefrontier.torch.run client/examples/ddp_example.py \
        --steps 300 --fault data:2:20 --fault-start 50

Faults (flags, or STAGEFRONTIER_FAULT="STAGE:RANK:MS[:EVERY[:START[:STOP]]]"): data (the
loader), forward, backward (a gradient hook), optimizer (the step) slowed by MS milliseconds on
RANK, every EVERY steps from step START until step STOP (never stops when omitted); these
sleep. Operator-level faults, where a user would meet them: `matmul` (the model's forward does
extra matrix products worth about MS milliseconds, calibrated at start, inside its `mixer`
module: one nn.Module of the model made slower), `collate` (the DataLoader's collate_fn sleeps
MS ms per batch) and `optstep` (the optimizer's step sleeps MS ms inside its own step: a slow
custom optimizer).

Hangs, for the stall verdict's tests: --hang STAGE:RANK:STEP[:SECONDS] (RANK sleeps in STAGE of
STEP, an hour by default, while the others block in the next all-reduce), --die STAGE:RANK:STEP
(RANK kills itself with SIGKILL there), --raise STAGE:RANK:STEP (RANK raises an exception there
that nothing catches: the trainer ends on it) and --pause STEP:SECONDS (every rank sleeps
between STEP and the next, as a checkpoint would: a group-wide pause, not a hang).
"""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset


class Fault:
    def __init__(self, spec, every, start, rank, stop=-1):
        self.stage, self.rank, self.ms = None, -1, 0.0
        self.every, self.start, self.stop = every, start, stop
        if spec:
            parts = spec.split(":")
            if len(parts) not in (3, 4, 5, 6):
                raise SystemExit(
                    f"--fault wants STAGE:RANK:MS[:EVERY[:START[:STOP]]], got {spec!r}")
            self.stage, self.rank, self.ms = parts[0], int(parts[1]), float(parts[2])
            if len(parts) > 3:
                self.every = int(parts[3])
            if len(parts) > 4:
                self.start = int(parts[4])
            if len(parts) > 5:
                self.stop = int(parts[5])
            if self.stage not in ("data", "forward", "backward", "optimizer", "matmul", "collate",
                                  "optstep"):
                raise SystemExit(f"unknown fault stage {self.stage!r}")
        self.my_rank = rank
        self.step = 0
        self.stops = []

    def due(self, stage):
        """True when the fault applies to STAGE on this rank at this step."""
        if stage != self.stage or self.my_rank != self.rank or self.step < self.start:
            return False
        if 0 <= self.stop <= self.step:
            return False
        return self.every <= 1 or (self.step - self.start) % self.every == 0

    def hit(self, stage):
        if self.due(stage):
            time.sleep(self.ms / 1000)
        for stop in self.stops:
            stop.hit(stage, self.my_rank, self.step)


class Stop:
    """--hang STAGE:RANK:STEP[:SECONDS], --die STAGE:RANK:STEP or --raise STAGE:RANK:STEP."""

    def __init__(self, spec, action):
        parts = spec.split(":")
        if len(parts) not in (3, 4) or (action != "hang" and len(parts) != 3):
            raise SystemExit(f"--{action} wants STAGE:RANK:STEP{'[:SECONDS]' if action == 'hang' else ''}"
                             f", got {spec!r}")
        self.stage, self.rank, self.step = parts[0], int(parts[1]), int(parts[2])
        self.seconds = float(parts[3]) if len(parts) == 4 else 3600.0
        self.action = action

    def hit(self, stage, rank, step):
        if stage != self.stage or rank != self.rank or step != self.step:
            return
        # When it stopped, for the hang evaluation's latency (tests/eval/hang_eval.py).
        print(f"EVENT {time.time():.3f}", flush=True)
        if self.action == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.action == "raise":
            raise RuntimeError(f"injected: rank {rank} raises in {stage} of step {step}")
        time.sleep(self.seconds)


class Synthetic(IterableDataset):
    def __init__(self, fault, batch, features, steps):
        self.fault, self.batch, self.features, self.steps = fault, batch, features, steps

    def __iter__(self):
        g = torch.Generator().manual_seed(1234 + self.fault.my_rank)
        for _ in range(self.steps):
            self.fault.hit("data")
            x = torch.randn(self.batch, self.features, generator=g)
            yield x, x.sum(dim=1, keepdim=True)


class Mixer(torch.nn.Module):
    """A module of the model that the matmul fault makes slower on one rank: its extra
    hidden x hidden products (none on other ranks, or without that fault)."""

    def __init__(self, fault, hidden):
        super().__init__()
        self.fault = fault
        self.extra = torch.randn(hidden, hidden) / hidden ** 0.5
        self.extra_products = 0
        if fault.stage == "matmul" and fault.rank == fault.my_rank:
            self.extra_products = self.products_for(fault.ms)

    def products_for(self, ms):
        """How many extra hidden x hidden products take about MS milliseconds here."""
        m = torch.randn(32, self.extra.shape[0])
        start = time.perf_counter()
        for _ in range(50):
            m = m @ self.extra
        each = (time.perf_counter() - start) / 50
        return max(1, round(ms / 1000 / max(each, 1e-7)))

    def forward(self, h):
        if self.extra_products and self.fault.due("matmul"):
            with torch.no_grad():
                m = h.new_ones(h.shape[0], self.extra.shape[0])
                for _ in range(self.extra_products):
                    m = m @ self.extra
        return h


class Model(torch.nn.Module):
    def __init__(self, fault, features, hidden, batchnorm=False):
        super().__init__()
        self.fault = fault
        # BatchNorm's running statistics are buffers: DDP then broadcasts them from rank 0 at
        # the start of every forward (a collective inside a compute stage).
        norm = [torch.nn.BatchNorm1d(hidden)] if batchnorm else []
        self.net = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), *norm,
                                       torch.nn.Linear(hidden, hidden), torch.nn.ReLU())
        self.mixer = Mixer(fault, hidden)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        self.fault.hit("forward")
        return self.head(self.mixer(self.net(x)))


class TrainingSGD(torch.optim.SGD):
    """SGD whose step can be slowed from inside (the optstep fault); every rank uses it, so
    the profiler's "Optimizer.step#TrainingSGD.step" range is named alike on all of them."""

    def __init__(self, params, fault, **kw):
        super().__init__(params, **kw)
        self.fault = fault

    def step(self, closure=None):
        self.fault.hit("optstep")
        return super().step(closure)


def profiler(steps, directory, rank):
    """A started torch.profiler that records steps FIRST..LAST (CPU) into
    DIRECTORY/trace_rank<RANK>.json; None without --profile-steps."""
    if not steps:
        return None
    first, last = (int(v) for v in steps.split(":"))
    if first < 1 or last < first:
        raise SystemExit(f"--profile-steps {steps}: want FIRST:LAST with 1 <= FIRST <= LAST")
    path = os.path.join(directory, f"trace_rank{rank}.json")
    # One more active step than asked: the trace ends before the last active step's
    # ProfilerStep range closes (torch 1.13), and stop() after the loop ends a longer schedule.
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=first - 1, warmup=1, active=last - first + 2,
                                         repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path))
    prof.start()
    return prof


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--fault", default=os.environ.get("STAGEFRONTIER_FAULT", ""))
    p.add_argument("--fault-every", type=int, default=1)
    p.add_argument("--fault-start", type=int, default=0)
    p.add_argument("--fault-stop", type=int, default=-1, help="first step without the fault")
    p.add_argument("--profile-steps", default="",
                   help="FIRST:LAST: capture a torch.profiler trace of these steps on every rank")
    p.add_argument("--profile-dir", default=".", help="where trace_rank<R>.json goes")
    p.add_argument("--hang", default="", help="STAGE:RANK:STEP[:SECONDS]: RANK sleeps there")
    p.add_argument("--die", default="", help="STAGE:RANK:STEP: RANK kills itself there")
    p.add_argument("--raise", dest="raise_", default="",
                   help="STAGE:RANK:STEP: RANK raises an exception there, uncaught")
    p.add_argument("--pause", default="", help="STEP:SECONDS: every rank sleeps after STEP")
    p.add_argument("--batchnorm", action="store_true",
                   help="a BatchNorm layer: DDP broadcasts its buffers in every forward")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    fault = Fault(args.fault, args.fault_every, args.fault_start, rank, args.fault_stop)
    fault.stops = ([Stop(args.hang, "hang")] if args.hang else []) + \
        ([Stop(args.die, "die")] if args.die else []) + \
        ([Stop(args.raise_, "raise")] if args.raise_ else [])
    pause_step, pause_s = (int(args.pause.split(":")[0]), float(args.pause.split(":")[1])) \
        if args.pause else (-1, 0.0)
    model = DDP(Model(fault, args.features, args.hidden, args.batchnorm))
    # The backward fault: a hook on the first layer's weight gradient (inside backward).
    model.module.net[0].weight.register_hook(lambda g: (fault.hit("backward"), g)[1])
    opt = TrainingSGD(model.parameters(), fault, lr=1e-3)
    # collate_fn with batch_size=None sees each batch (the collate fault sleeps in it).
    loader = DataLoader(Synthetic(fault, args.batch, args.features, args.steps), batch_size=None,
                        collate_fn=lambda b: (fault.hit("collate"), b)[1])
    prof = profiler(args.profile_steps, args.profile_dir, rank)
    start = time.monotonic()
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        fault.hit("optimizer")
        opt.step()
        if fault.step == pause_step:
            time.sleep(pause_s)
        fault.step += 1
        if prof is not None:
            prof.step()  # ProfilerStep#N is iteration N, the stub's step N
    if prof is not None:
        prof.stop()
    elapsed = time.monotonic() - start
    if rank == 0:
        print(f"ddp_example: {fault.step} steps in {elapsed:.2f} s "
              f"({1000 * elapsed / max(1, fault.step):.2f} ms/step)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
