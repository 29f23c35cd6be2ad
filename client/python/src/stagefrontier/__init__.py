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

A trainer that ends on an uncaught exception is not a rank that finished: importing this module
chains a hook before sys.excepthook's, which tells every client (Client.note_uncaught_exception)
before Python prints the traceback and exits, so that the coordinator reads the rank as gone
where it raised.
"""
import sys

from stagefrontier._stagefrontier import Client, ProbeRing, StageScope  # noqa: F401
from stagefrontier._stagefrontier import _note_uncaught_exception
from stagefrontier._version import __version__  # noqa: F401


def _install_excepthook():
    previous = sys.excepthook
    if getattr(previous, "_stagefrontier", False):
        return

    def hook(exc_type, exc, tb):
        try:
            _note_uncaught_exception()
        except Exception:  # never in the way of the trainer's own traceback
            pass
        previous(exc_type, exc, tb)

    hook._stagefrontier = True
    sys.excepthook = hook


_install_excepthook()

__all__ = ["Client", "ProbeRing", "StageScope", "__version__"]
