"""PyTorch integration: stage marks for DataLoader, forward, backward, the DDP gradient
all-reduce and the optimizer, without changing the training script.

Zero code change (also under torchrun):

    python -m stagefrontier.torch.run train.py --epochs 3
    torchrun --nproc_per_node 8 -m stagefrontier.torch.run train.py --epochs 3

Explicit, for custom loops:

    import stagefrontier.torch as sft
    sf = sft.instrument()                 # the same hooks as the launcher
    with sf.stage("data"): batch = next(it)
    @sf.staged("eval")                    # a custom stage (declare it: extra_stages=[("eval", "compute")])
    def evaluate(): ...

If the stub cannot be used, training goes on uninstrumented after one warning.
"""
from stagefrontier.torch.instrument import (  # noqa: F401
    DEFAULT_STAGES,
    Instrumentation,
    instrument,
)

__all__ = ["DEFAULT_STAGES", "Instrumentation", "instrument"]
