"""The evaluation workloads' injected fault: STAGE:RANK:MS, slowed every EVERY steps from START
until STOP (exclusive; -1 never stops). RANK is one rank or several joined by '+' (R[+R...],
e.g. fwd:2+3:8 slows ranks 2 and 3 alike: every rank of one node for a node-wide fault). One
schedule for every workload, so a row means the same thing whichever script runs it
(client/examples/ddp_example.py keeps its own copy: it is a self-contained example for users;
client/examples/synthetic_trainer.cc parses the same syntax).

    add_fault_args(parser)
    fault = Fault.from_args(parser.parse_args(), rank)
    fault.step = step
    fault.hit("optimizer")   # sleeps when this rank, stage and step are scheduled
"""
import time


def add_fault_args(parser, stages_help=""):
    parser.add_argument("--fault", default="",
                        help="STAGE:RANK:MS (RANK: R[+R...], several ranks)" + stages_help)
    parser.add_argument("--fault-every", type=int, default=1)
    parser.add_argument("--fault-start", type=int, default=0)
    parser.add_argument("--fault-stop", type=int, default=-1)


def parse_ranks(text):
    """"3" -> [3]; "2+3" -> [2, 3]."""
    return [int(r) for r in text.split("+")]


class Fault:
    """The fault of one process (rank `rank`). .ranks: the slowed ranks; .rank: the first of
    them (-1 without a fault), as before several ranks could be given."""

    def __init__(self, spec, every, start, stop, rank):
        self.stage, self.ranks, self.ms = None, [], 0.0
        if spec:
            stage, r, ms = spec.split(":")
            self.stage, self.ranks, self.ms = stage, parse_ranks(r), float(ms)
        self.rank = self.ranks[0] if self.ranks else -1
        self.every, self.start, self.stop, self.me, self.step = every, start, stop, rank, 0

    @classmethod
    def from_args(cls, args, rank):
        return cls(args.fault, args.fault_every, args.fault_start, args.fault_stop, rank)

    def hit(self, stage):
        if stage != self.stage or self.me not in self.ranks or self.step < self.start:
            return
        if 0 <= self.stop <= self.step:
            return
        if self.every <= 1 or (self.step - self.start) % self.every == 0:
            time.sleep(self.ms / 1000)
