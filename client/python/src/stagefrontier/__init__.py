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
where it raised, and, when the exception is the process group's (a peer gone:
`collective_failure`), as that collective's victim rather than the cause.
"""
import sys

from stagefrontier._stagefrontier import Client, ProbeRing, StageScope  # noqa: F401
from stagefrontier._stagefrontier import _note_uncaught_exception
from stagefrontier._version import __version__  # noqa: F401


# What the process group's errors say (torch 1.13's Gloo: "[../third_party/gloo/gloo/transport/
# tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:60591"; NCCL's name themselves).
_COLLECTIVE_FAILURE_MARKS = ("gloo/", "nccl", "connection closed by peer",
                             "connection reset by peer")


def collective_failure(exc):
    """True when `exc` is a collective's failure (a peer gone, a communicator aborted): the
    rank raised it waiting on its peers, not from its own work. torch >= 2.1 says so by type
    (torch.distributed.DistError); older torch only in the message."""
    try:
        dist = sys.modules.get("torch.distributed")  # never imports torch itself
        error = getattr(dist, "DistError", None)
        if isinstance(error, type) and isinstance(exc, error):
            return True
        text = str(exc)[:4096].lower()
    except Exception:  # an exception whose str() raises: say its own, as before
        return False
    return any(mark in text for mark in _COLLECTIVE_FAILURE_MARKS)


def _install_excepthook():
    previous = sys.excepthook
    if getattr(previous, "_stagefrontier", False):
        return

    def hook(exc_type, exc, tb):
        try:
            _note_uncaught_exception(in_collective=collective_failure(exc))
        except Exception:  # never in the way of the trainer's own traceback
            pass
        previous(exc_type, exc, tb)

    hook._stagefrontier = True
    sys.excepthook = hook


_install_excepthook()

__all__ = ["Client", "ProbeRing", "StageScope", "__version__"]
