"""The evaluation workloads' injected fault: STAGE:RANK:MS, slowed every EVERY steps from START
until STOP (exclusive; -1 never stops). One schedule for every workload, so a row means the
same thing whichever script runs it (client/examples/ddp_example.py keeps its own copy: it is
a self-contained example for users).

    add_fault_args(parser)
    fault = Fault.from_args(parser.parse_args(), rank)
    fault.step = step
    fault.hit("optimizer")   # sleeps when this rank, stage and step are scheduled
"""
import time


def add_fault_args(parser, stages_help=""):
    parser.add_argument("--fault", default="", help="STAGE:RANK:MS" + stages_help)
    parser.add_argument("--fault-every", type=int, default=1)
    parser.add_argument("--fault-start", type=int, default=0)
    parser.add_argument("--fault-stop", type=int, default=-1)


class Fault:
    def __init__(self, spec, every, start, stop, rank):
        self.stage, self.rank, self.ms = None, -1, 0.0
        if spec:
            stage, r, ms = spec.split(":")
            self.stage, self.rank, self.ms = stage, int(r), float(ms)
        self.every, self.start, self.stop, self.me, self.step = every, start, stop, rank, 0

    @classmethod
    def from_args(cls, args, rank):
        return cls(args.fault, args.fault_every, args.fault_start, args.fault_stop, rank)

    def hit(self, stage):
        if stage != self.stage or self.me != self.rank or self.step < self.start:
            return
        if 0 <= self.stop <= self.step:
            return
        if self.every <= 1 or (self.step - self.start) % self.every == 0:
            time.sleep(self.ms / 1000)
