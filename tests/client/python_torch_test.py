"""stagefrontier.torch on a plain (single-process) PyTorch loop, read back by the real reader:
the DataLoader, the model's forward, backward and the optimizer become stages; steps end at
optimizer.step(); the explicit API and the fallback when the stub cannot be used."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import torch
from torch.utils.data import DataLoader, Dataset

import stagefrontier.torch as sft

CLI = os.environ["STAGEFRONTIER_CLI"]


class Slow(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.ones(4), torch.ones(1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x):
        time.sleep(0.002)
        return self.lin(x)


def drain(directory, job):
    run = os.path.join(directory, "run.jsonl")
    subprocess.run([CLI, "segment", os.path.join(directory, f"stagefrontier.{job}.seg"), "--json",
                    "--drain", run], check=True, capture_output=True, text=True)
    with open(run) as f:
        return [json.loads(line) for line in f]


class TorchTest(unittest.TestCase):
    def test_plain_loop_becomes_stages(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        model = Model()
        sf = sft.Instrumentation(job_id="pt", rank=0, local_rank=0, world_size=1,
                                 local_world_size=1, shm_dir=d, quiet=True).install(model=model)
        try:
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            for x, y in DataLoader(Slow(), batch_size=2):  # 6 steps
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            self.assertEqual(sf.stats()["steps_recorded"], 6)
        finally:
            sf.uninstall()
        records = drain(d, "pt")
        self.assertEqual([r["step"] for r in records], list(range(6)))
        for r in records:
            b = r["boundaries_ns"]  # start, data, forward, backward, grad_sync, optimizer
            self.assertEqual(len(b), 6)
            self.assertGreaterEqual(b[1] - b[0], 6_000_000)  # two samples of 3 ms
            self.assertGreaterEqual(b[2] - b[1], 2_000_000)  # forward sleeps 2 ms
            self.assertEqual(b[4] - b[3], 0)  # no DDP: nothing to wait for in grad_sync
        # Uninstalled: PyTorch is back to itself.
        self.assertFalse(getattr(torch.Tensor.backward, "_stagefrontier", False))

    def test_explicit_api_and_custom_stage(self):
        d = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        sf = sft.Instrumentation(extra_stages=[("eval", "compute")], job_id="ex", rank=0,
                                 local_rank=0, world_size=1, local_world_size=1, shm_dir=d,
                                 quiet=True)

        @sf.staged("eval")
        def evaluate():
            time.sleep(0.004)

        for _ in range(3):
            with sf.stage("data"):
                time.sleep(0.001)
            evaluate()
            sf.step_boundary()
        self.assertEqual(sf.stats()["steps_recorded"], 3)
        records = drain(d, "ex")
        self.assertEqual(len(records[0]["boundaries_ns"]), 7)
        for r in records:
            b = r["boundaries_ns"]
            self.assertGreaterEqual(b[6] - b[5], 4_000_000)

    def test_training_goes_on_when_the_stub_cannot_be_used(self):
        sf = sft.Instrumentation(stages=[("bad name!", "io")])  # refused by the schema rules
        self.assertIsNone(sf.client)
        with sf.stage("data"):
            pass
        sf.step_boundary()
        self.assertEqual(sf.stats(), {})


if __name__ == "__main__":
    unittest.main()
