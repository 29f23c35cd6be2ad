#!/usr/bin/python3
"""A training loop on the explicit Python API with real Gloo collectives, for the hang
evaluation (tests/eval/hang_eval.py): stages load (io), compute (compute), allreduce (sync),
update (compute), and in --pipeline mode fwd (compute), xfer (sync: send/recv between rank
pairs), bwd (compute), allreduce (sync). One way to stop, printed as "EVENT <unix time>" when
it happens:

  --hang STAGE:RANK:STEP[:SECONDS]  RANK sleeps in STAGE of STEP (allreduce: after the
                                    collective completed, still inside the stage)
  --die STAGE:RANK:STEP             RANK kills itself with SIGKILL in STAGE of STEP
  --raise STAGE:RANK:STEP           RANK raises an exception in STAGE of STEP, uncaught: the
                                    trainer ends on it (the others' collective then fails too)
  --desync RANK:STEP                RANK calls a broadcast (stage bcast) instead of the
                                    all-reduce at STEP
Controls, which must not alarm: --pause STEP:SECONDS (every rank sleeps between STEP and the
next: a checkpoint), --eval STEP:SECONDS (every rank computes between steps: an evaluation
pass), --hiccup RANK:STEP:SECONDS (RANK's compute stage of STEP takes that much longer).

    torchrun --nproc_per_node 3 tests/eval/workloads/hang_loop.py --steps 400 --hang compute:1:150
"""
import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import stagefrontier
from stagefrontier.hang_dump import enable_hang_dumps


def spec(text, n, name):
    if not text:
        return None
    parts = text.split(":")
    if len(parts) < n:
        sys.exit(f"--{name} wants {n} or more fields, got {text!r}")
    return parts


def event():
    print(f"EVENT {time.time():.3f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--pipeline", action="store_true")
    p.add_argument("--hang", default="")
    p.add_argument("--die", default="")
    p.add_argument("--raise", dest="raise_", default="")
    p.add_argument("--desync", default="")
    p.add_argument("--pause", default="")
    p.add_argument("--eval", default="")
    p.add_argument("--hiccup", default="")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    hang, die = spec(args.hang, 3, "hang"), spec(args.die, 3, "die")
    raise_ = spec(args.raise_, 3, "raise")
    desync = spec(args.desync, 2, "desync")
    pause, evalp, hiccup = spec(args.pause, 2, "pause"), spec(args.eval, 2, "eval"), \
        spec(args.hiccup, 3, "hiccup")

    def stop(stage, step):
        """The --hang, --die and --raise actions, where they apply."""
        for s, action in ((hang, "hang"), (die, "die"), (raise_, "raise")):
            if s and s[0] == stage and int(s[1]) == rank and int(s[2]) == step:
                event()
                if action == "die":
                    os.kill(os.getpid(), signal.SIGKILL)
                if action == "raise":
                    raise RuntimeError(f"injected: rank {rank} raises in {stage} of step {step}")
                time.sleep(float(s[3]) if len(s) > 3 else 3600)

    if args.pipeline:
        stages = [("fwd", "compute"), ("xfer", "sync"), ("bwd", "compute"),
                  ("allreduce", "sync")]
    else:
        stages = [("load", "io"), ("compute", "compute"), ("allreduce", "sync"),
                  ("bcast", "sync"), ("update", "compute")]
    c = stagefrontier.Client(stages=stages)
    # Stacks at a stall, as on the Python API a user turns them on (stagefrontier.torch does it
    # by itself).
    dumps = enable_hang_dumps(c)
    w = torch.randn(128, 128)
    g = torch.Generator().manual_seed(rank)
    for step in range(args.steps):
        c.begin_step(step)
        if args.pipeline:
            # Pairs (0,1), (2,3), ...: the even rank sends activations to the odd one.
            peer = rank ^ 1
            with c.stage("fwd"):
                stop("fwd", step)
                x = (torch.randn(32, 128, generator=g) @ w).relu()
            with c.stage("xfer"):
                stop("xfer", step)
                if peer < world:
                    if rank % 2 == 0:
                        dist.send(x, peer)
                    else:
                        dist.recv(x, peer)
            with c.stage("bwd"):
                stop("bwd", step)
                grad = x.t() @ x
            with c.stage("allreduce"):
                dist.all_reduce(grad)
                stop("allreduce", step)
        else:
            with c.stage("load"):
                stop("load", step)
                x = torch.randn(32, 128, generator=g)
            with c.stage("compute"):
                stop("compute", step)
                if hiccup and int(hiccup[0]) == rank and int(hiccup[1]) == step:
                    time.sleep(float(hiccup[2]))
                grad = (x @ w).relu().t() @ x
            if desync and int(desync[0]) == rank and int(desync[1]) == step:
                event()
                with c.stage("bcast"):
                    dist.broadcast(grad, 0)
            else:
                with c.stage("allreduce"):
                    dist.all_reduce(grad)
                    stop("allreduce", step)
            with c.stage("update"):
                stop("update", step)
                w -= 1e-7 * grad
        c.end_step()
        if pause and int(pause[0]) == step:
            time.sleep(float(pause[1]))
        if evalp and int(evalp[0]) == step:
            until = time.monotonic() + float(evalp[1])
            while time.monotonic() < until:
                (w @ w).sum()
            dist.barrier()
    if dumps is not None:
        dumps.close()
    c.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
