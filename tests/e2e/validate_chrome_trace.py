#!/usr/bin/env python3
"""Checks a trace written by `sfctl export --format perfetto` (Python standard library only).

    validate_chrome_trace.py TRACE.json STEPS.json --world N [--expect-suspect STAGE:RANK]

STEPS.json is `sfctl --json steps` over the same range. Checked:
  1. The Chrome Trace Event Format (JSON object format), rule by rule, as RULES below says:
     the required keys of every event and their types per phase, X durations >= 0, metadata
     events naming every process and thread that holds a slice.
  2. The tracks: "steps", "frontier", "verdicts...", "rank 0".."rank N-1"; on each, slices in
     time order, none starting before the previous one ended.
  3. Accounting: per step, the frontier's slices are the stages in order and their durations
     sum to the step's exposed time (exposed_ns / 1000 us, within the rounding of the us
     conversion); the step's slice is as long; each rank's slices start at the step's start
     (aligned at step starts) and the longest rank's step is the exposed time.
  4. Verdict windows are there as slices with their label and steps; with --expect-suspect, one
     CLEAR window names that (stage, rank) first.
Prints PASS and exits 0, or prints every problem and exits 1.
"""
import argparse
import collections
import json
import numbers
import sys

# Per phase: required keys and their types. Integers exclude booleans (json gives bool for
# true/false, which Python counts as int).
INT = "int"
NUMBER = "number"
RULES = {
    "X": {"name": str, "ph": str, "ts": NUMBER, "dur": NUMBER, "pid": INT, "tid": INT},
    "M": {"name": str, "ph": str, "ts": NUMBER, "pid": INT, "tid": INT, "args": dict},
}
OPTIONAL = {"X": {"cat": str, "args": dict}, "M": {}}
METADATA_ARGS = {
    "process_name": ("name", str),
    "thread_name": ("name", str),
    "process_sort_index": ("sort_index", INT),
    "thread_sort_index": ("sort_index", INT),
}
LABELS = {"HEALTHY", "CLEAR", "AMBIGUOUS"}
# ts and dur are us with ns fractions: each value is within half a ns of the exact one.
US_TOLERANCE = 0.0015


def has_type(value, kind):
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_format(doc, problems):
    """Rule by rule; returns the X events by (pid, tid) and the thread names."""
    if not isinstance(doc, dict):
        problems.append("the document is not a JSON object")
        return {}, {}
    if not isinstance(doc.get("traceEvents"), list):
        problems.append("no traceEvents array")
        return {}, {}
    if doc.get("displayTimeUnit") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {doc.get('displayTimeUnit')!r} is neither ms nor ns")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or "aligned at step starts" not in str(meta.get("clock", "")).lower():
        problems.append("metadata.clock does not say the trace is aligned at step starts")
    slices = collections.defaultdict(list)
    process_names, thread_names = {}, {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i} {json.dumps(e)[:150]}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in RULES:
            problems.append(f"{where}: phase {ph!r} is not one this export writes (X, M)")
            continue
        bad = False
        for key, kind in RULES[ph].items():
            if key not in e:
                problems.append(f"{where}: no {key!r} (required for ph {ph})")
                bad = True
            elif not has_type(e[key], kind):
                problems.append(f"{where}: {key!r} is not a {getattr(kind, '__name__', kind)}")
                bad = True
        for key, kind in OPTIONAL[ph].items():
            if key in e and not has_type(e[key], kind):
                problems.append(f"{where}: {key!r} is not a {kind.__name__}")
                bad = True
        if bad:
            continue
        track = (e["pid"], e["tid"])
        if ph == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                problems.append(f"{where}: negative ts or dur")
            args = e.get("args", {})
            if "step" not in args and not ("first_step" in args and "last_step" in args):
                problems.append(f"{where}: the slice's args carry no step number")
            slices[track].append(e)
        else:
            name = e["name"]
            if name not in METADATA_ARGS:
                problems.append(f"{where}: unknown metadata event {name!r}")
                continue
            key, kind = METADATA_ARGS[name]
            if not has_type(e["args"].get(key), kind):
                problems.append(f"{where}: args.{key} is not a {getattr(kind, '__name__', kind)}")
                continue
            if name == "process_name":
                process_names[e["pid"]] = e["args"]["name"]
            elif name == "thread_name":
                thread_names[track] = e["args"]["name"]
    for track, events in slices.items():
        if track[0] not in process_names:
            problems.append(f"pid {track[0]} holds slices but has no process_name")
        if track not in thread_names:
            problems.append(f"pid {track[0]} tid {track[1]} holds slices but has no thread_name")
        end = float("-inf")
        for e in events:
            if e["ts"] < end - US_TOLERANCE:
                problems.append(f"track {thread_names.get(track)}: a slice starts before the "
                                f"previous one ended: {json.dumps(e)[:150]}")
            end = e["ts"] + e["dur"]
    return slices, thread_names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("steps")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--expect-suspect", default="")
    a = parser.parse_args()
    problems = []
    with open(a.trace) as f:
        doc = json.load(f)
    with open(a.steps) as f:
        steps_reply = json.load(f)

    slices, names = check_format(doc, problems)
    by_name = collections.defaultdict(list)
    for track, events in slices.items():
        by_name[names.get(track, "?")].extend(events)
    want = ["steps", "frontier"] + [f"rank {r}" for r in range(a.world)]
    for name in want:
        if not by_name.get(name):
            problems.append(f"no slices on track {name!r}")
    verdict_tracks = [n for n in by_name if n.startswith("verdicts")]
    if not verdict_tracks:
        problems.append("no verdict track")

    stages = steps_reply.get("stages", [])
    accounted = {int(s["step"]): s for s in steps_reply.get("steps", [])}
    if not accounted:
        problems.append("sfctl steps returned no step")

    # 3. Accounting, step by step.
    frontier = collections.defaultdict(list)
    for e in by_name["frontier"]:
        frontier[e["args"]["step"]].append(e)
    if set(frontier) != set(accounted):
        problems.append(f"frontier steps {sorted(set(frontier) ^ set(accounted))[:10]} are in "
                        "one of the trace and sfctl steps only")
    step_slices = {e["args"]["step"]: e for e in by_name["steps"]}
    for step, s in accounted.items():
        exposed_us = int(s.get("exposed_ns", "0")) / 1000.0
        got = frontier.get(step, [])
        if [e["name"] for e in got] != stages:
            problems.append(f"step {step}: frontier slices {[e['name'] for e in got]} are not "
                            f"the stages {stages}")
            continue
        for e, st in zip(got, s["stages"]):
            delta_us = int(st.get("increment_ns", "0")) / 1000.0
            if abs(e["dur"] - delta_us) > US_TOLERANCE:
                problems.append(f"step {step} {e['name']}: dF {e['dur']} us, accounted {delta_us}")
        total = sum(e["dur"] for e in got)
        if abs(total - exposed_us) > US_TOLERANCE * len(got):
            problems.append(f"step {step}: frontier slices sum to {total} us, exposed {exposed_us}")
        step_slice = step_slices.get(step)
        if step_slice is None or abs(step_slice["dur"] - exposed_us) > US_TOLERANCE:
            problems.append(f"step {step}: the step's slice is not as long as its exposed time")
            continue
        if abs(got[0]["ts"] - step_slice["ts"]) > US_TOLERANCE:
            problems.append(f"step {step}: the frontier does not start at the step's start")

    rank_steps = collections.defaultdict(list)  # step -> per rank [slices]
    for r in range(a.world):
        per_step = collections.defaultdict(list)
        for e in by_name[f"rank {r}"]:
            per_step[e["args"]["step"]].append(e)
        for step, events in per_step.items():
            rank_steps[step].append(events)
    for step, ranks in rank_steps.items():
        start = step_slices[step]["ts"] if step in step_slices else None
        longest = 0.0
        for events in ranks:
            if len(events) != len(stages):
                problems.append(f"step {step}: a rank has {len(events)} slices, not {len(stages)}")
            if start is not None and abs(events[0]["ts"] - start) > US_TOLERANCE:
                problems.append(f"step {step}: rank {events[0]['args']['rank']} does not start "
                                "at the step's start")
            longest = max(longest, sum(e["dur"] for e in events))
        if step in accounted:
            exposed_us = int(accounted[step].get("exposed_ns", "0")) / 1000.0
            if abs(longest - exposed_us) > US_TOLERANCE * len(stages):
                problems.append(f"step {step}: the longest rank's step is {longest} us, the "
                                f"exposed time {exposed_us} us")

    # 4. Verdict windows.
    windows = [e for n in verdict_tracks for e in by_name[n]]
    if not windows:
        problems.append("no verdict window in the trace")
    for w in windows:
        args = w.get("args", {})
        if args.get("label") not in LABELS or not args["first_step"] <= args["last_step"]:
            problems.append(f"verdict window without a label or steps: {json.dumps(w)[:200]}")
    if a.expect_suspect:
        stage, rank = a.expect_suspect.split(":")
        if not any(w["args"].get("label") == "CLEAR" and w["args"].get("suspects") and
                   w["args"]["suspects"][0]["stage"] == stage and
                   w["args"]["suspects"][0]["rank"] == int(rank) for w in windows):
            problems.append(f"no CLEAR verdict window names {stage} on rank {rank} first: "
                            f"{[w['name'] for w in windows]}")

    for p in problems[:50]:
        print("PROBLEM:", p)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print(f"PASS: {sum(len(v) for v in slices.values())} slices, {len(accounted)} steps, "
          f"{len(windows)} verdict windows: {sorted(set(w['name'] for w in windows))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
