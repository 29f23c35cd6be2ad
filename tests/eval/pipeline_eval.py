#!/usr/bin/python3
"""The pipeline x data-parallel evaluation on real processes: rows drawn at random with a
recorded seed, each one real run of tests/eval/workloads/pipeline_loop.py (Gloo, CPU, torchrun,
hand-instrumented through the Python API with its layout) through stub -> sidecar ->
coordinator, scored on whether the verdict names the injected (stage, rank) in the injected
rank's sync group (pp<s>, s = rank // D); plus healthy runs (half of them structurally
unbalanced pipelines), scored on whether the user sees HEALTHY.

A row: P pipeline stages x D data-parallel replicas, (P, D) from (2,2), (2,3), (3,2), (4,2),
(2,4); M micro-batches per step from 2, 3, 4; 240 steps. A faulty row slows one stage (data,
fwd, bwd or apply) of one rank (uniform over the P*D ranks) by 3-10 ms, persistently from step
40 or intermittently (every 3-6 steps from step 40); about a quarter of the faulty rows also run
an unbalanced pipeline (--stage-work-ms: one pipeline stage 2-4 ms heavier in fwd and again in
bwd). Healthy rows have no fault; half of them are unbalanced (one pipeline stage 2-5 ms
heavier). The verdict is read at the end of the run, as a user would:
`sfctl --json suspects --job pe<index>` (the current window: the last 100 steps).

With --tp-rows/--tp-healthy, tensor-parallel-like rows follow (tests/eval/workloads/tp_loop.py:
T tensor ranks x D replicas, (T, D) from (2,2), (2,3), (3,2), (4,2), 3 all-reduces over the
tensor group in each of fwd and bwd, both kind `tensor`), drawn from seed + 1 so that the
pipeline rows of a seed stay as they were; the same faults and patterns. With
--1f1b-rows/--1f1b-healthy, pipeline rows on Megatron's 1F1B schedule follow (pipeline_loop.py
--schedule 1f1b: stages re-entered per micro-batch and summed by the stub), drawn as the
pipeline rows are, from seed + 2. With --loss-sync every pipeline row also ends each step with
an all-reduce over every rank of the job (stage loss_sync, kind sync): a collective over the
whole job beside the groups' own.

Scores of a faulty row:
  top1   the first suspect is (injected stage, injected rank) and .verdict.sync_group is
         "pp<s>" of the injected rank
         (tp rows: "pp0.tp<t>", t = rank % T; a fault inside fwd or bwd, the tensor stages,
         slows its whole tensor group alike, so top1 there is AMBIGUOUS with candidate_ranks
         exactly that tensor group and the first suspect in the stage on one of its ranks)
  top2   the injected (stage, rank) is among the first two suspects
  clear  label CLEAR with candidate_ranks == [injected rank] (tp rows, tensor stages: top1)
  dashboards: the mean- and max-over-ranks dashboards' top stage (.mean_top_stage,
         .max_top_stage) of `sfctl suspects --window 240` (all steps: the dashboards need the
         40 healthy steps before the fault as their baseline, as in hidden_rank_eval.py) equal
         the injected stage; the current window's pointers are recorded too (*_now).
A healthy row scores HEALTHY; a non-HEALTHY verdict is "rank-targeted" when it is CLEAR or
AMBIGUOUS with suspects. A row that fails to run is kept as an error row (scored as a miss).

    bazel build //daemon/coordinator:all //daemon/sidecar:all //daemon/sfctl:all \
        //client/python:package
    /usr/bin/python3 tests/eval/pipeline_eval.py --rows 40 --healthy 12 --seed 20261126 \
        --out docs/data/pipeline_eval_20261126.jsonl
    /usr/bin/python3 tests/eval/pipeline_eval.py --only-print \
        --out docs/data/pipeline_eval_20261126.jsonl

An engine change is measured on the journals a live run kept (its --work directory), without
running the trainers again: --replay re-decides every row with --bin's `stagefrontier journal`.

    /usr/bin/python3 tests/eval/pipeline_eval.py --bin bazel-bin --seed 20261204 \
        --out docs/data/pipeline_eval_20261204_loss_sync.jsonl --replay out/pipeline_eval
"""
import argparse
import collections
import glob
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

BIN = "bazel-bin"
SHAPES = [(2, 2), (2, 3), (3, 2), (4, 2), (2, 4)]
# Tensor-parallel-like rows (tests/eval/workloads/tp_loop.py): T tensor ranks x D replicas.
TP_SHAPES = [(2, 2), (2, 3), (3, 2), (4, 2)]
TP_TENSOR_STAGES = {"fwd", "bwd"}  # kind tensor in tp_loop.py
MICRO = [2, 3, 4]
FAULT_STAGES = ["data", "fwd", "bwd", "apply"]
FAULT_START = 40


# One sfctl client and step wait for the evaluations (bazel-bin, as BIN here).
import fault_signal  # noqa: E402
from hidden_rank_eval import sfctl, wait_steps  # noqa: E402
from replay_journals import journal_report  # noqa: E402


def job_windows(port, job, row):
    """The verdicts of the job's closed windows (group "job" only), oldest first."""
    count = (row["steps"] // 100) * (1 + row["shape"][0])
    out = subprocess.run([f"{BIN}/daemon/sfctl/sfctl", "--coordinator", f"127.0.0.1:{port}",
                          "--json", "--timeout", "5", "watch", "--job", job, "--count",
                          str(count)], capture_output=True, text=True, timeout=30)
    events = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return [e for e in events if e["verdict"].get("group") == "job"]


class Daemons:
    """One coordinator on 127.0.0.1:PORT (journals under WORK/data) and one sidecar draining
    WORK/shm, serving every row in turn; restarted when either has exited."""

    def __init__(self, work, port):
        self.work, self.port, self.procs, self.starts = work, port, [], 0
        self.log = open(os.path.join(work, "daemons.log"), "a")

    def alive(self):
        if not self.procs or any(p.poll() is not None for p in self.procs):
            return False
        try:
            sfctl(self.port, "jobs")
            return True
        except Exception:
            return False

    def ensure(self):
        if self.alive():
            return
        self.stop()
        self.starts += 1
        shm = os.path.join(self.work, "shm")
        os.makedirs(shm, exist_ok=True)
        coord = subprocess.Popen(
            [f"{BIN}/daemon/coordinator/stagefrontier-coordinator", "--listen",
             f"127.0.0.1:{self.port}", "--metrics-listen", "", "--data-dir",
             os.path.join(self.work, f"data{self.starts}"), "--no-fsync", "--no-captures",
             # As tests/e2e/e2e_torch_pipeline_test.sh: torchrun's ranks start staggered.
             "--step-deadline-ms", "10000",
             # Every row is a job on the one sidecar's stream: more than the default 64.
             "--max-jobs-per-stream", "4096"], stdout=self.log, stderr=self.log)
        self.procs = [coord]
        for _ in range(100):
            try:
                sfctl(self.port, "jobs")
                break
            except Exception:
                time.sleep(0.1)
        self.procs.append(subprocess.Popen(
            [f"{BIN}/daemon/sidecar/stagefrontier-sidecar", "--coordinator",
             f"127.0.0.1:{self.port}", "--shm-dir", shm, "--node", "n0"],
            stdout=self.log, stderr=self.log))
        time.sleep(0.5)

    def stop(self):
        """SIGTERM in reverse start order (the sidecar drains before the coordinator)."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []


def workload_flags(row):
    if row.get("workload") == "tp":
        flags = ["--tensor-size", str(row["shape"][0]), "--steps", str(row["steps"])]
        if row.get("kernel_ms"):
            flags += ["--kernel-ms", f"{row['kernel_ms']:g}"]
        if row.get("stage") is not None:
            flags += ["--fault", f"{row['stage']}:{row['rank']}:{row['fault_ms']:.3f}",
                      "--fault-every", str(row["every"]), "--fault-start", str(row["start"])]
        return flags
    p, d = row["shape"]
    flags = ["--pipeline-stages", str(p), "--micro-batches", str(row["micro"]),
             "--steps", str(row["steps"])]
    if row.get("schedule", "gpipe") != "gpipe":
        flags += ["--schedule", row["schedule"]]
    if row.get("loss_sync"):
        flags += ["--loss-sync"]
    if row.get("stage_work_ms"):
        flags += ["--stage-work-ms", ",".join(f"{v:g}" for v in row["stage_work_ms"])]
    if row.get("stage") is not None:
        flags += ["--fault", f"{row['stage']}:{row['rank']}:{row['fault_ms']:.3f}",
                  "--fault-every", str(row["every"]), "--fault-start", str(row["start"])]
    return flags


def run_torchrun(row, work, daemons, master_port, timeout):
    p, d = row["shape"]
    rowdir = os.path.join(work, f"row{row['index']:02d}")
    shutil.rmtree(rowdir, ignore_errors=True)
    os.makedirs(rowdir)
    env = dict(os.environ, OMP_NUM_THREADS="1", STAGEFRONTIER_QUIET="1",
               STAGEFRONTIER_SHM_DIR=os.path.join(work, "shm"),
               PYTHONPATH=os.path.abspath(f"{BIN}/client/python"))
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", f"--nproc_per_node={p * d}",
           f"--master_port={master_port}", f"--rdzv_id={row['job']}", "--redirects", "2",
           "--tee", "1", "--log_dir", os.path.join(rowdir, "torchrun"),
           f"tests/eval/workloads/{row.get('workload', 'pipeline')}_loop.py",
           *workload_flags(row)]
    with open(os.path.join(rowdir, "torchrun.log"), "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
    with open(os.path.join(rowdir, "torchrun.log")) as f:
        text = f.read()
    m = re.search(r"(?:pipeline|tp)_loop: \d+ steps, ([\d.]+) ms/step", text)
    return rc, (float(m.group(1)) if m else None), text


def run_row(row, work, daemons, port, master_port, timeout):
    daemons.ensure()
    result = dict(row)
    t0 = time.time()
    rc, ms_step, text = run_torchrun(row, work, daemons, master_port, timeout)
    result.update(torchrun_rc=rc, torchrun_s=round(time.time() - t0, 1), ms_per_step=ms_step)
    if rc != 0:
        result.update(error=f"torchrun exited {rc}: " + " | ".join(text.strip().splitlines()[-4:]))
    job = row["job"]
    got = wait_steps(port, job, row["steps"], timeout=30 if rc == 0 else 5)
    result.update(steps_accounted=got)
    if rc == 0 and got < row["steps"]:
        result.update(error=f"{got} of {row['steps']} steps accounted")
    try:
        sus = sfctl(port, "suspects", "--job", job)
        v = sus["verdict"]
        result.update(
            label=v["label"], reason=v.get("reason", ""), sync_group=v.get("sync_group", ""),
            window_steps=[int(v.get("first_step", -1)), int(v.get("last_step", -1))],
            suspects=[dict(stage=s["stage"], rank=int(s["rank"]),
                           share=round(float(s.get("share", 0)), 3))
                      for s in v.get("suspects", [])[:3]],
            candidate_ranks=[int(r) for r in v.get("candidate_ranks", [])],
            unreliable=v.get("unreliable", []), group_wide=bool(v.get("group_wide", False)),
            explanation=v.get("explanation", ""),
            mean_points_at_now=sus.get("mean_top_stage", ""),
            max_points_at_now=sus.get("max_top_stage", ""),
            frontier_points_at_now=sus.get("frontier_top_stage", ""))
        # Every closed window of the job (each group's too: 1 + P verdicts a window).
        result.update(windows=[w["verdict"]["label"] for w in job_windows(port, job, row)])
        pre = sfctl(port, "steps", "--job", job, "--from", "10",
                    "--to", str(FAULT_START - 1))["steps"]
        healthy = statistics.median(int(s["exposed_ns"]) for s in pre) if pre else 0
        result.update(healthy_step_ms=round(healthy / 1e6, 3))
        dash = sfctl(port, "suspects", "--job", job, "--window", str(row["steps"]))
        result.update(mean_points_at=dash.get("mean_top_stage", ""),
                      max_points_at=dash.get("max_top_stage", ""),
                      frontier_points_at=dash.get("frontier_top_stage", ""))
        if row.get("stage") is not None:
            result.update(magnitude_pct=round(100 * row["fault_ms"] * 1e6 / healthy, 1)
                          if healthy else None)
        judge(row, result)
        add_signal(row, glob.glob(os.path.join(work, "data*", f"{job}.journal")), result)
    except Exception as e:
        result.setdefault("error", f"reading the verdict: {e}")
    if "error" in result:
        result.update({k: False for k in (("top1", "top2", "clear", "mean_hit", "max_hit")
                                          if row.get("stage") is not None else ("healthy",))
                       if k not in result})
    return result


def judge(row, result):
    """Scores the verdict read into `result` (label, suspects, candidate_ranks, sync_group and
    the dashboards' pointers): top1, top2, clear for a faulty row; healthy, rank_targeted for a
    healthy one."""
    top = [(s["stage"], s["rank"]) for s in result["suspects"]]
    label = result["label"]
    if row.get("stage") is None:
        result.update(healthy=label == "HEALTHY",
                      rank_targeted=label in ("CLEAR", "AMBIGUOUS") and bool(top))
        return
    want = (row["stage"], row["rank"])
    group, tensor_group = expected_group(row)
    if tensor_group:  # a fault inside a tensor stage: its tensor group, named together
        top1 = (label == "AMBIGUOUS" and sorted(result["candidate_ranks"]) == tensor_group and
                bool(top) and top[0][0] == row["stage"] and top[0][1] in tensor_group)
        clear = top1
    else:
        top1 = bool(top) and top[0] == want and result["sync_group"] == group
        clear = label == "CLEAR" and result["candidate_ranks"] == [row["rank"]]
    result.update(top1=top1, top2=want in top[:2], clear=clear,
                  mean_hit=result.get("mean_points_at") == row["stage"],
                  max_hit=result.get("max_points_at") == row["stage"])


def replay_row(row, work):
    """`row` of a live run re-decided from the journal its coordinator kept under `work`
    (data<N>/<job>.journal) by `stagefrontier journal --json`: the verdict over the last 100
    steps and the job's closed windows, as the live run read them from sfctl; the dashboards'
    pointers and the step times stay the live run's."""
    result = {k: v for k, v in row.items()
              if k not in ("error", "top1", "top2", "clear", "healthy", "rank_targeted")}
    journals = sorted(glob.glob(os.path.join(work, "data*", f"{row['job']}.journal")),
                      key=os.path.getsize)
    if not journals:
        result.update(error=f"no journal of {row['job']} under {work}")
    else:
        report, error = journal_report(journals[-1], f"{BIN}/daemon/analyze/stagefrontier")
        if report is None:
            result.update(error=f"replaying {journals[-1]}: {error[:200]}")
        else:
            v = report["report"]["verdict"]
            result.update(
                label=v["label"], reason=v.get("reason", ""), sync_group=v.get("sync_group", ""),
                window_steps=[v["first_step"], v["last_step"]],
                suspects=[dict(stage=s["stage"], rank=s["rank"], share=round(s["share"], 3))
                          for s in v["suspects"][:3]],
                candidate_ranks=v["candidate_ranks"], unreliable=v["unreliable"],
                group_wide=v["group_wide"], explanation=v["explanation"],
                windows=[w["label"] for w in report["windows"] if w["group"] == "job"],
                replayed=True)
            judge(row, result)
            add_signal(row, journals, result)
    if "error" in result:
        result.update({k: False for k in (("top1", "top2", "clear", "mean_hit", "max_hit")
                                          if row.get("stage") is not None else ("healthy",))})
    return result


def expected_group(row):
    """(the sync group that should decide, the ranks a tensor-stage fault names together or
    None). pipeline_loop: pp<s>, s = rank // D. tp_loop: pp0.tp<t>, t = rank % T; a fault in a
    tensor stage slows its whole tensor group (the replica's T ranks) alike."""
    if row.get("workload") == "tp":
        t_size = row["shape"][0]
        replica = row["rank"] // t_size
        tensor_group = (list(range(replica * t_size, (replica + 1) * t_size))
                        if row["stage"] in TP_TENSOR_STAGES else None)
        return f"pp0.tp{row['rank'] % t_size}", tensor_group
    return f"pp{row['rank'] // row['shape'][1]}", None


def role_peers(row):
    """The ranks the faulty rank is compared with: the other replicas' rank at the same
    pipeline stage (pipeline_loop) or tensor position (tp_loop)."""
    if row.get("workload") == "tp":
        t_size, d = row["shape"]
        ranks = [r * t_size + row["rank"] % t_size for r in range(d)]
    else:
        d = row["shape"][1]
        ranks = [row["rank"] // d * d + r for r in range(d)]
    return [r for r in ranks if r != row["rank"]]


def add_signal(row, journals, result):
    """What the marks carry about the fault (fault_signal.py): result["signal"], from the
    largest of `journals` (a row's coordinator journal); a faulty row only."""
    if row.get("stage") is None or not journals:
        return
    try:
        result["signal"] = fault_signal.journal_signal(
            max(journals, key=os.path.getsize), f"{BIN}/daemon/analyze/stagefrontier",
            row["rank"], role_peers(row), row["stage"], row["start"],
            result.get("window_steps"))
    except (OSError, RuntimeError, ValueError) as e:
        result["signal"] = dict(error=str(e)[:200])


def draw_tp(seed, first_index, rows, healthy, steps):
    """Tensor-parallel-like rows, drawn from their own generator (seed + 1) so that adding them
    leaves the pipeline rows of a seed as they were."""
    rng = random.Random(seed + 1)
    table = []
    for i in range(rows + healthy):
        t_size, d = rng.choice(TP_SHAPES)
        row = dict(index=first_index + i, job=f"pe{first_index + i}", workload="tp",
                   shape=[t_size, d], micro=0, steps=steps, stage=None, pattern="healthy",
                   stage_work_ms=None)
        if i < rows:
            pattern = rng.choice(["persistent", "intermittent"])
            row.update(stage=rng.choice(FAULT_STAGES), rank=rng.randrange(t_size * d),
                       fault_ms=round(rng.uniform(3.0, 10.0), 3), pattern=pattern,
                       every=rng.randint(3, 6) if pattern == "intermittent" else 1,
                       start=FAULT_START)
        table.append(row)
    return table


def draw(seed, rows, healthy, steps):
    rng = random.Random(seed)
    unbalanced = set(rng.sample(range(rows), round(rows / 4)))
    table = []
    for i in range(rows):
        p, d = rng.choice(SHAPES)
        micro = rng.choice(MICRO)
        rank = rng.randrange(p * d)
        stage = rng.choice(FAULT_STAGES)
        fault_ms = round(rng.uniform(3.0, 10.0), 3)
        pattern = rng.choice(["persistent", "intermittent"])
        every = rng.randint(3, 6) if pattern == "intermittent" else 1
        work = None
        if i in unbalanced:
            work = [0.0] * p
            work[rng.randrange(p)] = round(rng.uniform(2.0, 4.0), 1)
        table.append(dict(index=i, job=f"pe{i}", shape=[p, d], micro=micro, steps=steps,
                          stage=stage, rank=rank, fault_ms=fault_ms, pattern=pattern,
                          every=every, start=FAULT_START, stage_work_ms=work))
    for j in range(healthy):
        p, d = rng.choice(SHAPES)
        micro = rng.choice(MICRO)
        work = None
        if j % 2 == 1:
            work = [0.0] * p
            work[rng.randrange(p)] = round(rng.uniform(2.0, 5.0), 1)
        table.append(dict(index=rows + j, job=f"pe{rows + j}", shape=[p, d], micro=micro,
                          steps=steps, stage=None, pattern="healthy", stage_work_ms=work))
    return table


def draw_1f1b(seed, first_index, rows, healthy, steps):
    """Pipeline rows on the 1F1B schedule: drawn as draw() does, from their own generator
    (seed + 2), so that adding them leaves the other rows of a seed as they were."""
    table = draw(seed + 2, rows, healthy, steps)
    for i, row in enumerate(table):
        row.update(index=first_index + i, job=f"pe{first_index + i}", schedule="1f1b")
    return table


def pct(k, n):
    return f"{100 * k / n:5.1f}%" if n else "    -"


def schedule(row):
    return row.get("schedule", "gpipe")


def effect_lines(results):
    """What each missed fault did to the job's step: its ms/step against the median of the
    healthy rows of the same kind (workload, shape, schedule, balanced or not) in these
    results, beside what the fault would add if nothing absorbed it (fault_ms / every). A
    sleeping rank frees its core for the others on this oversubscribed machine, so a fault
    can cost the job less than its length, or nothing measurable. Then what the stage marks
    carry about it (the row's "signal", fault_signal.py)."""
    def kind(r):
        return (r.get("workload", "pipeline"), tuple(r["shape"]), schedule(r),
                bool(r.get("stage_work_ms")))
    base = collections.defaultdict(list)
    for r in results:
        if r.get("stage") is None and r.get("ms_per_step"):
            base[kind(r)].append(r["ms_per_step"])
    out = []
    for r in results:
        if r.get("stage") is None or r.get("top1") or not r.get("ms_per_step"):
            continue
        b = base.get(kind(r))
        measured = (f"{r['ms_per_step'] - statistics.median(b):+.2f} ms/step against "
                    f"{len(b)} healthy run(s) of its kind" if b else "no healthy run of its kind")
        out.append(f"  miss row {r['index']}: {r['stage']} rank {r['rank']} "
                   f"{r['fault_ms']:.1f} ms every {r['every']}: nominal "
                   f"+{r['fault_ms'] / r['every']:.2f} ms/step, measured {measured}; "
                   f"read {r.get('label', 'error')} {r.get('reason', '')}".rstrip())
        sig = r.get("signal") or {}
        if sig.get("steps"):
            out.append(f"    its marks: {sig['gap_ms']:+.2f} ms a step against its role peers "
                       f"(sd {sig['sd_ms']:.2f} ms), z {sig['z_run']:.1f} over the run, "
                       f"{sig.get('z_verdict', 0):.1f} in the verdict's window")
    return (["misses, the fault's effect on the step:"] + out) if out else []


def summarize(results, seed):
    faulty = [r for r in results if r.get("stage") is not None]
    healthy = [r for r in results if r.get("stage") is None]
    steps = results[0]["steps"] if results else 0
    lines = [f"pipeline eval, seed {seed}, {steps} steps; verdict = sfctl suspects at the end "
             "(last 100 steps); dashboards over all steps",
             f"{'shape':<8}{'faulty':>7}{'top-1':>8}{'top-2':>8}{'CLEAR':>8}{'mean':>8}"
             f"{'max':>8}  |{'healthy':>8}{'HEALTHY':>9}"]

    def row_line(name, fs, hs):
        n = len(fs)
        return (f"{name:<8}{n:>7}{pct(sum(r['top1'] for r in fs), n):>8}"
                f"{pct(sum(r['top2'] for r in fs), n):>8}{pct(sum(r['clear'] for r in fs), n):>8}"
                f"{pct(sum(r['mean_hit'] for r in fs), n):>8}"
                f"{pct(sum(r['max_hit'] for r in fs), n):>8}  |{len(hs):>8}"
                f"{pct(sum(r['healthy'] for r in hs), len(hs)):>9}")

    lines.append(row_line("all", faulty, healthy))
    for p, d in SHAPES:
        fs = [r for r in faulty if tuple(r["shape"]) == (p, d) and r.get("workload") != "tp"]
        hs = [r for r in healthy if tuple(r["shape"]) == (p, d) and r.get("workload") != "tp"]
        if fs or hs:
            lines.append(row_line(f"{p}x{d}", fs, hs))
    for sched in ("gpipe", "1f1b"):
        fs = [r for r in faulty if r.get("workload") != "tp" and schedule(r) == sched]
        hs = [r for r in healthy if r.get("workload") != "tp" and schedule(r) == sched]
        if (fs or hs) and any(schedule(r) != "gpipe" for r in results):
            lines.append(row_line(sched, fs, hs))
    for t_size, d in TP_SHAPES:
        fs = [r for r in faulty if tuple(r["shape"]) == (t_size, d) and r.get("workload") == "tp"]
        hs = [r for r in healthy if tuple(r["shape"]) == (t_size, d) and r.get("workload") == "tp"]
        if fs or hs:
            lines.append(row_line(f"tp{t_size}x{d}", fs, hs))
    for name, sel in (("persist", lambda r: r["pattern"] == "persistent"),
                      ("intermit", lambda r: r["pattern"] == "intermittent"),
                      ("unbal", lambda r: bool(r.get("stage_work_ms"))),
                      ("balanced", lambda r: not r.get("stage_work_ms"))):
        fs = [r for r in faulty if sel(r)]
        hs = [r for r in healthy if sel(r)] if name in ("unbal", "balanced") else []
        if fs or hs:
            lines.append(row_line(name, fs, hs))
    for st in FAULT_STAGES:
        fs = [r for r in faulty if r["stage"] == st]
        if fs:
            lines.append(row_line(st, fs, []))
    if faulty:
        labels = collections.Counter(
            (r.get("label", "error") + " " + r.get("reason", "")).strip() for r in faulty)
        lines.append("faulty labels: " + ", ".join(f"{k} {v}" for k, v in labels.most_common()))
        now_mean = sum(r.get("mean_points_at_now") == r["stage"] for r in faulty)
        now_max = sum(r.get("max_points_at_now") == r["stage"] for r in faulty)
        lines.append(f"dashboards on the current window only (last 100 steps): mean "
                     f"{now_mean}/{len(faulty)}, max {now_max}/{len(faulty)}")
    if healthy:
        labels = collections.Counter(
            (r.get("label", "error") + " " + r.get("reason", "")).strip() for r in healthy)
        lines.append("healthy labels: " + ", ".join(f"{k} {v}" for k, v in labels.most_common())
                     + f"; rank-targeted non-HEALTHY: {sum(bool(r.get('rank_targeted')) for r in healthy)}")
        windows = [w for r in healthy for w in r.get("windows", [])]
        if windows:
            lines.append(f"healthy runs' closed job windows: "
                         f"{sum(w == 'HEALTHY' for w in windows)}/{len(windows)} HEALTHY")
    lines += effect_lines(results)
    errors = [r for r in results if "error" in r]
    lines.append(f"error rows: {len(errors)}" +
                 "".join(f"\n  row {r['index']}: {r['error'][:200]}" for r in errors))
    return "\n".join(lines)


def record(out, result):
    """Prints a finished row and appends it to the rows file (kept as each row ends)."""
    print(json.dumps(result), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(result) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=40, help="faulty rows")
    ap.add_argument("--healthy", type=int, default=12, help="healthy rows")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--tp-rows", type=int, default=0,
                    help="faulty tensor-parallel-like rows (tp_loop.py), after the others")
    ap.add_argument("--tp-healthy", type=int, default=0, help="healthy tensor-parallel-like rows")
    ap.add_argument("--tp-kernel-ms", type=float, default=0.0,
                    help="tp rows: sleeping 'kernel' time per pass (tp_loop.py --kernel-ms), so "
                         "that the ranks do not share this machine's cores for their compute")
    ap.add_argument("--1f1b-rows", dest="f1b_rows", type=int, default=0,
                    help="faulty pipeline rows on the 1F1B schedule, after the tp rows")
    ap.add_argument("--1f1b-healthy", dest="f1b_healthy", type=int, default=0,
                    help="healthy pipeline rows on the 1F1B schedule")
    ap.add_argument("--out", default="docs/data/pipeline_eval_20261126.jsonl",
                    help="rows, one JSON object a line, written as each row finishes")
    ap.add_argument("--work", default="out/pipeline_eval", help="daemons' and rows' logs")
    ap.add_argument("--port", type=int, default=18351, help="the coordinator's gRPC port")
    ap.add_argument("--master-port", type=int, default=29900,
                    help="torchrun --master_port of row 0 (row i: this + i)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per torchrun")
    ap.add_argument("--bin", default="bazel-bin", help="where the built binaries are")
    ap.add_argument("--only", default="", help="comma-separated row indices to run")
    ap.add_argument("--loss-sync", action="store_true",
                    help="pipeline rows end each step with an all-reduce over every rank "
                         "(pipeline_loop.py --loss-sync: a collective over the whole job)")
    ap.add_argument("--only-print", action="store_true",
                    help="print the summary of the rows in --out; run nothing")
    ap.add_argument("--replay", metavar="WORK",
                    help="re-decide the rows in --out from the journals a live run left under "
                         "its --work directory WORK, with --bin's stagefrontier (an engine "
                         "change measured on the same processes); run nothing, change nothing")
    ap.add_argument("--replay-out", default="",
                    help="with --replay: write the re-decided rows here")
    args = ap.parse_args()
    global BIN
    BIN = args.bin
    if args.replay:
        with open(args.out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        results = [replay_row(r, args.replay) for r in rows]
        if args.replay_out:
            with open(args.replay_out, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in results)
        print(summarize(results, args.seed))
        return 0
    if args.only_print:
        with open(args.out) as f:
            print(summarize([json.loads(line) for line in f if line.strip()], args.seed))
        return 0
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    open(args.out, "w").close()
    only = {int(i) for i in args.only.split(",") if i}
    daemons = Daemons(args.work, args.port)
    results = []
    t_all = time.time()
    try:
        table = draw(args.seed, args.rows, args.healthy, args.steps)
        tp = draw_tp(args.seed, len(table), args.tp_rows, args.tp_healthy, args.steps)
        for row in tp:
            row["kernel_ms"] = args.tp_kernel_ms or None
        table += tp
        table += draw_1f1b(args.seed, len(table), args.f1b_rows, args.f1b_healthy, args.steps)
        for row in table:
            if args.loss_sync and row.get("workload", "pipeline") == "pipeline":
                row["loss_sync"] = True
        for row in table:
            if only and row["index"] not in only:
                continue
            t0 = time.time()
            res = run_row(row, args.work, daemons, args.port, args.master_port + row["index"],
                          args.timeout)
            res["seconds"] = round(time.time() - t0, 1)
            results.append(res)
            record(args.out, res)
    finally:
        daemons.stop()
    print(f"wall time: {time.time() - t_all:.0f} s for {len(results)} rows")
    print(summarize(results, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
