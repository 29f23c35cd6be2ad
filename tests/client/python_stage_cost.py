#!/usr/bin/python3
"""Cost of the Python stub inside a training loop: `with c.stage(...)`, `c.mark(...)` and a whole
step, against an empty loop and a pure-Python context manager. Prints ns per operation (median
of 7 rounds). Documented harness for docs/results.md:

    bazel build -c opt //client/python:package
    PYTHONPATH=bazel-bin/client/python /usr/bin/python3 tests/client/python_stage_cost.py
"""
import contextlib
import statistics
import tempfile
import time

import stagefrontier

N = 200_000


def per_op(fn, n=N, rounds=7):
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        samples.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(samples)


def main():
    c = stagefrontier.Client(stages=[("data", "io"), ("forward", "compute"), ("backward", "compute"),
                                     ("grad_sync", "sync"), ("optimizer", "compute"),
                                     ("log", "io")],
                             job_id="pycost", rank=0, world_size=1, ring_capacity=1024,
                             shm_dir=tempfile.mkdtemp(), quiet=True)
    names = ["data", "forward", "backward", "grad_sync", "optimizer", "log"]

    def empty(n):
        for _ in range(n):
            pass

    def with_stage(n):
        c.begin_step()
        for _ in range(n):
            with c.stage("data"):
                pass

    @contextlib.contextmanager
    def py_cm():
        yield

    def with_python_cm(n):
        for _ in range(n):
            with py_cm():
                pass

    def mark(n):
        c.begin_step()
        for _ in range(n):
            c.mark("data")

    def step(n):
        for _ in range(n):
            c.begin_step()
            for name in names:
                with c.stage(name):
                    pass
            c.end_step()

    base = per_op(empty)
    rows = [
        ("empty loop iteration", base),
        ("with c.stage(name): pass", per_op(with_stage) - base),
        ("c.mark(name)", per_op(mark) - base),
        ("pure-Python @contextmanager, for scale", per_op(with_python_cm) - base),
        ("whole step: begin, 6 x with c.stage, end", per_op(step, n=N // 10) - base),
    ]
    for name, ns in rows:
        print(f"{name:45s} {ns:8.1f} ns")
    s = c.stats()
    print(f"(steps recorded {s['steps_recorded']}, dropped because no reader drained "
          f"{s['steps_dropped_full']})")


if __name__ == "__main__":
    main()
