"""The reader's own `train.py` of the README's PyTorch section, for tests/docs/docs_walk.sh: a
plain DDP training script (Gloo, CPU) that knows nothing of StageFrontier, run as written there:

    torchrun --nproc_per_node 8 --rdzv_id run42 train.py --epochs 3
"""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(1024, 16), torch.randn(1024, 1))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
