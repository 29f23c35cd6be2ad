"""Runs a training script with StageFrontier instrumentation, unchanged:

    python -m stagefrontier.torch.run [--comm-hook|--no-comm-hook] [--annotate] [--no-captures] train.py [args...]
    torchrun --nproc_per_node 4 -m stagefrontier.torch.run train.py [args...]

Each rank's 3D-parallel layout is inferred from the process group the script gives to DDP;
STAGEFRONTIER_LAYOUT="pipeline_stage=1,pipeline_stages=2,tensor_rank=0,tensor_size=1" (set per
rank) overrides it, STAGEFRONTIER_TORCH_INFER_LAYOUT=0 turns it off (instrument.py).
"""
import atexit
import os
import runpy
import sys

from stagefrontier.torch.instrument import _warn, instrument


def main():
    argv = sys.argv[1:]
    comm_hook = None
    annotate = None
    captures = None
    usage = ("usage: python -m stagefrontier.torch.run [--comm-hook|--no-comm-hook] [--annotate] "
             "[--no-captures] SCRIPT [ARGS...]")
    while argv and argv[0].startswith("-"):
        flag = argv.pop(0)
        if flag in ("-h", "--help"):
            print(usage + "\nRuns SCRIPT instrumented (one rank; under torchrun, each): see "
                  "stagefrontier-torchrun for the launcher.")
            return 0
        if flag == "--annotate":
            annotate = True
        elif flag == "--no-captures":
            captures = False
        elif flag == "--no-comm-hook":
            comm_hook = False
        elif flag == "--comm-hook":
            comm_hook = True
        elif flag == "--":
            break
        else:
            print(f"{usage}\nunknown flag {flag}", file=sys.stderr)
            return 2
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    sf = instrument(comm_hook=comm_hook, annotate=annotate, captures=captures)

    def report():
        sf.close()
        if os.environ.get("STAGEFRONTIER_VERBOSE") == "1" and sf.client is not None:
            _warn(f"rank {sf.client.rank}: {sf.stats()}")

    atexit.register(report)
    sys.argv = argv
    script = os.path.abspath(argv[0])
    sys.path.insert(0, os.path.dirname(script))
    # __file__ absolute, as `python script.py` makes it (3.9 on), so that a script that changes
    # directory still finds its files beside it; run_path makes sys.argv[0] the same path.
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
