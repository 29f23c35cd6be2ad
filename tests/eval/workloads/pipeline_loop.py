#!/usr/bin/python3
"""A pipeline x data-parallel training loop on Gloo (torch.distributed, CPU), hand-instrumented
through the explicit Python API, for the evaluation and tests/e2e/e2e_torch_pipeline_test.sh.

World = P pipeline stages x D data-parallel replicas (D = WORLD_SIZE / P). With
--rank-order pp-major (the default) rank r holds pipeline stage s = r // D of replica d = r % D;
with --rank-order dp-major it holds s = r % P of replica d = r // P, so a contiguous block of
ranks (one torchrun node of a multi-node run) holds every pipeline stage of some replicas.
Either way rank(s, d) is the inverse mapping (pp-major: s*D + d; dp-major: d*P + s); a rank's
pipeline neighbours are rank(s-1, d) and rank(s+1, d), and the D ranks of pipeline stage s,
rank(s, 0..D-1), form its data-parallel group (one torch.distributed.new_group per pipeline
stage, created by every rank in the same order). The declared layout says pipeline_stage=s.
Each pipeline stage is one WxW linear layer + ReLU (W = --width), the last one ends in a
squared-error loss; gradients are written by hand (no autograd). A micro-batch's activation
is --batch x --width, by default 32x128: Debian's torch 1.13 has a generic BLAS (~1.4 ms per
64x256x256 matmul), and 4 ranks on 2 cores ran 64x256 at ~42 ms/step, 32x128 at ~18 ms/step.

Schedule: GPipe (all M micro-batches' forwards, then all their backwards), not 1F1B. The stub
flags a stage entered twice in one step, so each instrumented stage is one contiguous interval
per step that covers the work of that kind for every micro-batch:

    data       make the step's M micro-batches (inputs on the first stage, targets on the last)
    recv_act   receive M activations from the previous pipeline stage (first stage: ~0)
    fwd        M forwards
    send_act   send M activations to the next pipeline stage (last stage: ~0)
    recv_grad  receive M output gradients from the next pipeline stage (last stage: ~0)
    bwd        M backwards (last stage: from the loss, its gradient computed here)
    send_grad  send M input gradients to the previous pipeline stage (first stage: ~0)
    dp_sync    all-reduce the weight gradient over the data-parallel group
    apply      SGD update

The sends and receives are kind p2p: they wait on a pipeline neighbour, not on the rank's
data-parallel group (dp_sync is that group's sync stage).

Blocking dist.send/dist.recv pair up in the same order on both ends: stage s sends its M
activations (tag 1) in micro-batch order after its forwards, stage s+1 receives them in that
order before its forwards; gradients (tag 2) flow back the same way after the backwards. The
wait chain is acyclic: the last stage needs only activations, every other stage's recv_grad
needs only its successor's bwd, so every step completes.

    torchrun --nproc_per_node 4 tests/eval/workloads/pipeline_loop.py --pipeline-stages 2 \
        --steps 240 --fault fwd:3:8 --fault-start 40
    # two nodes of 2 ranks, each node one replica (ranks 0,1 / 2,3 hold stages 0,1):
    torchrun --nnodes 2 --node_rank K --nproc_per_node 2 --master_addr 127.0.0.1 \
        --master_port 29500 tests/eval/workloads/pipeline_loop.py --pipeline-stages 2 \
        --rank-order dp-major --steps 240 --fault fwd:2+3:8 --fault-start 40
"""
import argparse
import time

import torch
import torch.distributed as dist

import stagefrontier
from fault_schedule import Fault, add_fault_args

STAGES = [
    ("data", "io"),
    ("recv_act", "p2p"),
    ("fwd", "compute"),
    ("send_act", "p2p"),
    ("recv_grad", "p2p"),
    ("bwd", "compute"),
    ("send_grad", "p2p"),
    ("dp_sync", "sync"),
    ("apply", "compute"),
]
ACT_TAG, GRAD_TAG = 1, 2


# --loss-sync: a collective over every rank of the job after apply (the step's loss averaged
# over the world, as training scripts log it), declared sync like the group's own.
LOSS_SYNC = ("loss_sync", "sync")


def make_client(s, p, no_layout, stages=STAGES):
    if not no_layout:
        layout = {"pipeline_stage": s, "pipeline_stages": p, "tensor_rank": 0, "tensor_size": 1}
        try:
            return stagefrontier.Client(stages=stages, layout=layout)
        except TypeError as e:
            why = (str(e).splitlines() or [type(e).__name__])[0].rstrip(":")
            print(f"pipeline_loop: warning: this stagefrontier.Client takes no layout ({why}); "
                  "running without one", flush=True)
    return stagefrontier.Client(stages=stages)


def stage_work(spec, p):
    """--stage-work-ms "2,4": extra ms per pipeline stage (one value: every stage)."""
    if not spec:
        return [0.0] * p
    ms = [float(v) for v in spec.split(",")]
    if len(ms) == 1:
        ms = ms * p
    if len(ms) != p:
        raise SystemExit(f"--stage-work-ms {spec!r}: want {p} values (one per pipeline stage)")
    return ms


class StepContext:
    """What one rank's step needs besides its micro-batches."""

    def __init__(self, c, fault, w, s, p, m, prev_rank, next_rank, extra_s, batch, width):
        self.c, self.fault, self.w, self.s, self.p, self.m = c, fault, w, s, p, m
        self.prev_rank, self.next_rank, self.extra_s = prev_rank, next_rank, extra_s
        self.batch, self.width = batch, width


def gpipe_step(ctx, xs, targets):
    """All M forwards, then all M backwards; every stage entered once. Returns the weight's
    gradient."""
    c, w, m = ctx.c, ctx.w, ctx.m
    with c.stage("recv_act"):
        if ctx.prev_rank is not None:
            for x in xs:
                dist.recv(x, src=ctx.prev_rank, tag=ACT_TAG)
    with c.stage("fwd"):
        ctx.fault.hit("fwd")
        if ctx.extra_s:
            time.sleep(ctx.extra_s)
        ys = [(x @ w).relu() for x in xs]
    with c.stage("send_act"):
        if ctx.next_rank is not None:
            for y in ys:
                dist.send(y, dst=ctx.next_rank, tag=ACT_TAG)
    with c.stage("recv_grad"):
        if ctx.next_rank is not None:
            dys = [torch.empty(ctx.batch, ctx.width) for _ in range(m)]
            for dy in dys:
                dist.recv(dy, src=ctx.next_rank, tag=GRAD_TAG)
    with c.stage("bwd"):
        ctx.fault.hit("bwd")
        if ctx.next_rank is None:  # d(mean squared error)/dy: compute, so not in recv_grad
            dys = [(y - t) * (2.0 / y.numel()) for y, t in zip(ys, targets)]
        if ctx.extra_s:
            time.sleep(ctx.extra_s)
        grad_w = torch.zeros_like(w)
        dxs = []
        for x, y, dy in zip(xs, ys, dys):
            dz = dy * (y > 0)
            grad_w += x.t() @ dz
            if ctx.prev_rank is not None:
                dxs.append(dz @ w.t())
    with c.stage("send_grad"):
        if ctx.prev_rank is not None:
            for dx in dxs:
                dist.send(dx, dst=ctx.prev_rank, tag=GRAD_TAG)
    return grad_w


def exchange(c, send, recv):
    """Post a send and a receive together (either may be None), then wait for each inside
    its own stage: (stage, tensor, peer, tag) each. Megatron's send_forward_recv_backward and
    send_backward_recv_forward: with blocking sends, two neighbours that both send first
    would wait on each other (Gloo sends when the receiver has posted its receive)."""
    works = []
    for op, item in ((dist.isend, send), (dist.irecv, recv)):
        if item is not None:
            stage, tensor, peer, tag = item
            works.append((stage, op(tensor, peer, tag=tag)))
    for stage, work in works:
        with c.stage(stage):
            work.wait()


def one_f_one_b_step(ctx, xs, targets):
    """1F1B (Megatron's non-interleaved schedule): min(P - s - 1, M) warm-up forwards, then
    one forward and one backward in turn, then the remaining backwards. Stages are entered
    once per micro-batch; the stub sums them (docs/link-the-stub.md "What a step record
    says"). The fault and the stage's extra work hit micro-batch 0 (the fault once per step,
    as in GPipe); the extra work is spread over the M micro-batches. Returns the weight's
    gradient."""
    c, w, m = ctx.c, ctx.w, ctx.m
    prev_rank, next_rank = ctx.prev_rank, ctx.next_rank
    warmup = min(ctx.p - ctx.s - 1, m)
    ys, grad_w = [None] * m, torch.zeros_like(w)
    # A rank at either end never waits on one side: enter those stages once, empty, so that
    # the record does not say a stage never ran.
    for stage, absent in (("recv_act", prev_rank is None), ("send_grad", prev_rank is None),
                          ("send_act", next_rank is None), ("recv_grad", next_rank is None)):
        if absent:
            with c.stage(stage):
                pass

    def recv_act(i):
        if prev_rank is not None:
            with c.stage("recv_act"):
                dist.recv(xs[i], src=prev_rank, tag=ACT_TAG)

    def forward(i):
        with c.stage("fwd"):
            if i == 0:
                ctx.fault.hit("fwd")
            if ctx.extra_s:
                time.sleep(ctx.extra_s / m)
            ys[i] = (xs[i] @ w).relu()

    def backward(j, dy):
        with c.stage("bwd"):
            if j == 0:
                ctx.fault.hit("bwd")
            if next_rank is None:  # d(mean squared error)/dy: compute, so not in recv_grad
                dy = (ys[j] - targets[j]) * (2.0 / ys[j].numel())
            if ctx.extra_s:
                time.sleep(ctx.extra_s / m)
            dz = dy * (ys[j] > 0)
            grad_w.add_(xs[j].t() @ dz)
            return dz @ w.t() if prev_rank is not None else None

    def grad_buffer():
        return torch.empty(ctx.batch, ctx.width) if next_rank is not None else None

    for i in range(warmup):
        recv_act(i)
        forward(i)
        if next_rank is not None:
            with c.stage("send_act"):
                dist.send(ys[i], dst=next_rank, tag=ACT_TAG)
    steady = m - warmup
    if steady:
        recv_act(warmup)
    for k in range(steady):
        i = warmup + k
        forward(i)
        dy = grad_buffer()
        exchange(c, ("send_act", ys[i], next_rank, ACT_TAG) if next_rank is not None else None,
                 ("recv_grad", dy, next_rank, GRAD_TAG) if next_rank is not None else None)
        dx = backward(k, dy)
        last = k == steady - 1
        exchange(c, ("send_grad", dx, prev_rank, GRAD_TAG) if prev_rank is not None else None,
                 ("recv_act", xs[i + 1], prev_rank, ACT_TAG)
                 if prev_rank is not None and not last else None)
    for j in range(steady, m):
        dy = grad_buffer()
        if next_rank is not None:
            with c.stage("recv_grad"):
                dist.recv(dy, src=next_rank, tag=GRAD_TAG)
        dx = backward(j, dy)
        if prev_rank is not None:
            with c.stage("send_grad"):
                dist.send(dx, dst=prev_rank, tag=GRAD_TAG)
    return grad_w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--pipeline-stages", type=int, default=2, help="P, 2..4")
    ap.add_argument("--micro-batches", type=int, default=2, help="M per step")
    ap.add_argument("--batch", type=int, default=32, help="rows of a micro-batch's activation")
    ap.add_argument("--width", type=int, default=128, help="activation width (weights WxW)")
    ap.add_argument("--stage-work-ms", default="",
                    help="MS[,MS...]: extra sleep per pipeline stage in fwd and again in bwd, "
                         "each step (e.g. 2,4: a structurally unbalanced pipeline)")
    ap.add_argument("--rank-order", choices=["pp-major", "dp-major"], default="pp-major",
                    help="pp-major: rank r is pipeline stage r // D of replica r % D; dp-major: "
                         "stage r % P of replica r // P (a node's ranks hold whole pipelines)")
    ap.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe",
                    help="gpipe: all forwards, then all backwards; 1f1b: Megatron's "
                         "one-forward-one-backward order (stages re-entered per micro-batch)")
    ap.add_argument("--loss-sync", action="store_true",
                    help="end each step with an all-reduce over every rank (stage loss_sync)")
    ap.add_argument("--no-layout", action="store_true",
                    help="create the Client without layout= (the API before it)")
    add_fault_args(ap, " with STAGE one of data, fwd, bwd, apply")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    p, m = args.pipeline_stages, args.micro_batches
    batch, width = args.batch, args.width
    if not 2 <= p <= 4 or world % p != 0:
        raise SystemExit(f"--pipeline-stages {p}: want 2..4 dividing WORLD_SIZE {world}")
    d_count = world // p
    if args.rank_order == "dp-major":
        s, d = rank % p, rank // p

        def rank_of(stage, replica):
            return replica * p + stage
    else:
        s, d = rank // d_count, rank % d_count

        def rank_of(stage, replica):
            return stage * d_count + replica
    prev_rank = rank_of(s - 1, d) if s > 0 else None
    next_rank = rank_of(s + 1, d) if s < p - 1 else None
    dp_group = None
    for stage in range(p):  # every rank creates every group, in the same order
        g = dist.new_group(ranks=[rank_of(stage, r) for r in range(d_count)])
        if stage == s:
            dp_group = g
    extra_s = stage_work(args.stage_work_ms, p)[s] / 1000
    fault = Fault.from_args(args, rank)

    c = make_client(s, p, args.no_layout, STAGES + [LOSS_SYNC] if args.loss_sync else STAGES)
    w = torch.randn(width, width, generator=torch.Generator().manual_seed(1000 + s)) / width ** 0.5
    g = torch.Generator().manual_seed(rank)
    one_step = gpipe_step if args.schedule == "gpipe" else one_f_one_b_step
    ctx = StepContext(c, fault, w, s, p, m, prev_rank, next_rank, extra_s, batch, width)
    start = time.monotonic()
    for step in range(args.steps):
        c.begin_step(step)
        fault.step = step
        with c.stage("data"):
            fault.hit("data")
            xs = [torch.randn(batch, width, generator=g) if prev_rank is None
                  else torch.empty(batch, width) for _ in range(m)]
            targets = [torch.randn(batch, width, generator=g) for _ in range(m)] \
                if next_rank is None else None
        grad_w = one_step(ctx, xs, targets)
        with c.stage("dp_sync"):
            dist.all_reduce(grad_w, group=dp_group)
        with c.stage("apply"):
            fault.hit("apply")
            w -= (1e-2 / d_count) * grad_w
        if args.loss_sync:
            with c.stage("loss_sync"):
                dist.all_reduce(grad_w[0, :1].clone())
        c.end_step()
    if rank == 0:
        ms = 1000 * (time.monotonic() - start) / max(1, args.steps)
        print(f"pipeline_loop: {args.steps} steps, {ms:.2f} ms/step "
              f"({p} pipeline stages x {d_count} replicas, {m} micro-batches)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
