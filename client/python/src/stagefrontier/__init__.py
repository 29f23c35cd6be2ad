"""StageFrontier stub for Python: per-step stage marks into the node's shared-memory segment.

    import stagefrontier
    c = stagefrontier.Client(stages=[("data", "io"), ("forward", "compute"),
                                     ("backward", "compute"), ("grad_sync", "sync"),
                                     ("optimizer", "compute")])
    c.begin_step()
    with c.stage("data"):
        batch = next(it)
    ...
    c.end_step()

`stagefrontier.torch` instruments PyTorch training without code changes
(`python -m stagefrontier.torch.run train.py`). docs/link-the-stub.md.
"""
from stagefrontier._stagefrontier import Client, ProbeRing, StageScope  # noqa: F401
from stagefrontier._version import __version__  # noqa: F401

__all__ = ["Client", "ProbeRing", "StageScope", "__version__"]
