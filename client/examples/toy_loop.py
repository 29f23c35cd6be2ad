#!/usr/bin/python3
"""A toy training loop instrumented with the Python stub.

    PYTHONPATH=bazel-bin/client/python /usr/bin/python3 client/examples/toy_loop.py --steps 50
"""
import argparse
import time

import stagefrontier


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--data-ms", type=float, default=0.2)
    args = parser.parse_args()

    c = stagefrontier.Client(stages=[("data", "io"), ("forward", "compute"),
                                     ("backward", "compute"), ("grad_sync", "sync"),
                                     ("optimizer", "compute")])
    for _ in range(args.steps):
        c.begin_step()
        with c.stage("data"):
            time.sleep(args.data_ms / 1000)
        with c.stage("forward"):
            time.sleep(0.0003)
        with c.stage("backward"):
            time.sleep(0.0006)
        c.mark("grad_sync")  # "grad_sync ended now"
        with c.stage("optimizer"):
            time.sleep(0.0001)
        if c.should_capture_trace():
            print(f"coordinator asked for a trace of step {c.current_step}")
        c.end_step()
    s = c.stats()
    reason = "" if c.enabled else f": {c.disabled_reason}"
    print(f"rank {c.rank}: {s['steps_begun']} steps, {s['steps_recorded']} recorded, "
          f"{s['steps_dropped_full']} dropped (ring full), {s['steps_not_recorded']} not recorded"
          f"{reason}")


if __name__ == "__main__":
    main()
