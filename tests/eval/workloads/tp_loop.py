#!/usr/bin/python3
"""A tensor-parallel-like x data-parallel training loop on Gloo (torch.distributed, CPU),
hand-instrumented through the explicit Python API with its layout, for the evaluation
(tests/eval/pipeline_eval.py, rows of kind "tp").

World = T tensor ranks x D data-parallel replicas (D = WORLD_SIZE / T), in Megatron's order:
rank r is tensor rank t = r % T of replica d = r // T. The T ranks of a replica form its tensor
group, the D ranks of tensor rank t its data-parallel group (one torch.distributed.new_group
each, created by every rank in the same order). The declared layout says tensor_rank=t,
tensor_size=T (one pipeline stage). Each of L layers (--layers) multiplies the rank's shard of
the activation by its WxW weight and all-reduces the partial result over the tensor group (a
row-parallel linear layer's pattern), in the forward and again in the backward: L all-reduces
inside small groups in every pass. The stub takes one contiguous interval per stage and step,
so compute and the tensor group's all-reduces interleave inside fwd and bwd: those stages are
kind `tensor` (work and the tensor group's collectives end together; `mixed` would say they
wait on the data-parallel group).

    data       make the step's batch
    fwd        L layers: matmul + all-reduce over the tensor group       (tensor)
    bwd        L layers: matmul + all-reduce over the tensor group       (tensor)
    dp_sync    all-reduce the weight gradients over the data-parallel group (sync)
    apply      SGD update

    torchrun --nproc_per_node 4 tests/eval/workloads/tp_loop.py --tensor-size 2 \
        --steps 240 --fault fwd:3:8 --fault-start 40
"""
import argparse
import time

import torch
import torch.distributed as dist

import stagefrontier
from fault_schedule import Fault, add_fault_args

STAGES = [
    ("data", "io"),
    ("fwd", "tensor"),
    ("bwd", "tensor"),
    ("dp_sync", "sync"),
    ("apply", "compute"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--tensor-size", type=int, default=2, help="T, 2..4")
    ap.add_argument("--layers", type=int, default=3, help="L all-reduces per pass")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--kernel-ms", type=float, default=0.0,
                    help="a GPU kernel's stand-in: sleep this long per pass (fwd, bwd), spread "
                         "over the layers' matmuls; the CPU is free meanwhile, as it is while a "
                         "GPU computes")
    add_fault_args(ap, " with STAGE one of data, fwd, bwd, apply")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t_size = args.tensor_size
    if not 2 <= t_size <= 4 or world % t_size != 0:
        raise SystemExit(f"--tensor-size {t_size}: want 2..4 dividing WORLD_SIZE {world}")
    d_count = world // t_size
    t, d = rank % t_size, rank // t_size
    tp_group = dp_group = None
    for replica in range(d_count):  # every rank creates every group, in the same order
        g = dist.new_group(ranks=[replica * t_size + i for i in range(t_size)])
        if replica == d:
            tp_group = g
    for tensor_rank in range(t_size):
        g = dist.new_group(ranks=[r * t_size + tensor_rank for r in range(d_count)])
        if tensor_rank == t:
            dp_group = g
    fault = Fault.from_args(args, rank)
    layout = {"pipeline_stage": 0, "pipeline_stages": 1, "tensor_rank": t,
              "tensor_size": t_size}
    c = stagefrontier.Client(stages=STAGES, layout=layout)
    width, batch = args.width, args.batch
    gen = torch.Generator().manual_seed(1000 + t)
    ws = [torch.randn(width, width, generator=gen) / width ** 0.5 for _ in range(args.layers)]
    g = torch.Generator().manual_seed(d)  # the replica's data: the same on its tensor ranks
    per_layer_s = args.kernel_ms / 1000 / args.layers

    def kernel():
        if per_layer_s > 0:
            time.sleep(per_layer_s)

    start = time.monotonic()
    for step in range(args.steps):
        c.begin_step(step)
        fault.step = step
        with c.stage("data"):
            fault.hit("data")
            x = torch.randn(batch, width, generator=g)
        with c.stage("fwd"):
            fault.hit("fwd")
            acts = [x]
            for w in ws:
                y = acts[-1] @ w
                kernel()
                dist.all_reduce(y, group=tp_group)
                acts.append((y / t_size).tanh())
        with c.stage("bwd"):
            fault.hit("bwd")
            dy = acts[-1] * (2.0 / acts[-1].numel())
            grads = []
            for w, a_in, a_out in zip(reversed(ws), reversed(acts[:-1]), reversed(acts[1:])):
                dz = dy * (1 - a_out * a_out) / t_size
                grads.append(a_in.t() @ dz)
                dy = dz @ w.t()
                kernel()
                dist.all_reduce(dy, group=tp_group)
        with c.stage("dp_sync"):
            flat = torch.cat([gr.flatten() for gr in grads])
            dist.all_reduce(flat, group=dp_group)
        with c.stage("apply"):
            fault.hit("apply")
            for w, gr in zip(reversed(ws), flat.split(width * width)):
                w -= (1e-2 / d_count) * gr.view(width, width)
        c.end_step()
    if rank == 0:
        ms = 1000 * (time.monotonic() - start) / max(1, args.steps)
        print(f"tp_loop: {args.steps} steps, {ms:.2f} ms/step "
              f"({t_size} tensor ranks x {d_count} replicas, {args.layers} layers, "
              f"{args.kernel_ms:g} ms of kernel per pass)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
