"""A Gloo job whose DDP all-reduces over a subgroup, as a pipeline's stages do: the first half
of the ranks and the second half each form a data-parallel group with
torch.distributed.new_group (every rank creates both, in the same order) and give theirs to
DistributedDataParallel. Nothing here declares a layout: under `-m stagefrontier.torch.run`,
each rank's is inferred from its DDP group (pipeline stage 0 or 1 of 2)."""
import argparse
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    half = world // 2
    groups = [dist.new_group(list(range(half))), dist.new_group(list(range(half, world)))]
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 4), process_group=groups[rank // half])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    for _ in range(args.steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        time.sleep(0.002)
    sf = sys.modules["stagefrontier.torch.instrument"]._ACTIVE
    print(f"torch_subgroup_ddp: rank {rank}: layout {sf.layout if sf else None}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
