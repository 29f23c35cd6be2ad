"""torchrun with StageFrontier: the training script runs unchanged under the instrumentation.

    stagefrontier-torchrun --nproc_per_node 8 --rdzv_id run42 train.py --epochs 3
    python3 -m stagefrontier.torchrun --nproc_per_node 8 --rdzv_id run42 train.py --epochs 3

It takes torchrun's own flags and runs `torchrun ... -m stagefrontier.torch.run train.py ...`
in this very Python (so a virtual environment's workers import what it installed), after:

* working around torch 1.13 on Python 3.11, whose torchrun cannot read its own default
  `--redirects 0` / `--tee 0` (nor 3): Python 3.11 no longer lists the zero and combined
  members of an IntFlag, and `Std.from_str` returns None for them, which fails later with
  "AttributeError: 'NoneType' object has no attribute 'get'";
* warning when no `--rdzv_id` is given: every such run is job `none` to StageFrontier.

Exit status 2 for a usage error or when this Python cannot import PyTorch (with what to do).
"""
import os
import sys

USAGE = """usage: stagefrontier-torchrun [TORCHRUN FLAGS] SCRIPT [ARGS...]

Runs SCRIPT under torchrun with StageFrontier's instrumentation (stagefrontier.torch.run):
every rank's data, forward, backward, grad_sync and optimizer stages are reported to the
node's sidecar; the script is unchanged. TORCHRUN FLAGS are torchrun's own
(python3 -m torch.distributed.run --help), e.g. --nproc_per_node 8 --rdzv_id run42.
Give each run its own --rdzv_id: it is the job's id in sfctl and the web view.
"""


def _fix_std_from_str(std):
    """Makes Std.from_str read every documented value on Python 3.11 (torch 1.13)."""
    if std.from_str("0") is not None and std.from_str("3") is not None:
        return False
    original = std.from_str.__func__

    def from_str(cls, vm):
        import re
        if re.match(r"^[0123]$", vm):
            return cls(int(vm))
        if re.match(r"^(\d:[0123],)*(\d:[0123])$", vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        return original(cls, vm)  # raises the usual ValueError

    std.from_str = classmethod(from_str)
    return True


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    try:
        import torch.distributed.run as torchrun
        from torch.distributed.elastic.multiprocessing.api import Std
    except ImportError as e:
        print(f"stagefrontier-torchrun: this Python ({sys.executable}) cannot import PyTorch: {e}\n"
              "On Debian 12, PyTorch is python3-torch for /usr/bin/python3: make the virtual "
              "environment from it with\n  /usr/bin/python3 -m venv --system-site-packages DIR\n"
              "and install the wheel with DIR/bin/pip.", file=sys.stderr)
        return 2
    parser = torchrun.get_args_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse printed what was wrong
        return 2 if e.code else 0
    if args.module or args.no_python:
        print("stagefrontier-torchrun: runs a script (SCRIPT [ARGS...]), not -m/--no_python; use "
              "python3 -m torch.distributed.run ... -m stagefrontier.torch.run SCRIPT",
              file=sys.stderr)
        return 2
    _fix_std_from_str(Std)
    if args.rdzv_id == "none" and not os.environ.get("TORCHELASTIC_RUN_ID"):
        print("stagefrontier-torchrun: no --rdzv_id given: this run is reported as job 'none', "
              "like every other run without one (its records can be taken for a re-run's); "
              "give each run its own --rdzv_id", file=sys.stderr)
    args.training_script_args = [args.training_script] + list(args.training_script_args)
    args.training_script = "stagefrontier.torch.run"
    args.module = True
    torchrun.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
