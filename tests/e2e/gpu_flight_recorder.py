"""Hang evidence with NCCL, on a GPU machine (tests/bench/gpu_machine_run.sh step 6): a rank
under stagefrontier.hang_dump, an NCCL process group of one GPU, a few all-reduces, then the
sidecar's part done by hand (the capture id into the slot's dump_request_id, SIGUSR2 to the
process). Checks that the stacks file and torch's NCCL Flight Recorder dump both appear under
the capture id, and that the dump holds the all-reduces. Prints what it saw; exit 0 when right.

    python3 tests/e2e/gpu_flight_recorder.py --work /tmp/fr
"""
import argparse
import json
import mmap
import os
import shutil
import signal
import struct
import sys
import time


def request_dump(seg_path, local_rank, capture_id):
    # docs/segment-format.md: slot at slots_offset + local_rank * slot_bytes, +1688.
    with open(seg_path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        slot_bytes, = struct.unpack_from("<Q", m, 40)
        slots_offset, = struct.unpack_from("<Q", m, 128)
        struct.pack_into("<Q", m, slots_offset + local_rank * slot_bytes + 1688, capture_id)


def wait_for(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--collectives", type=int, default=12)
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)  # never read a previous run's files
    os.makedirs(args.work)
    captures = os.path.join(args.work, "captures")
    os.environ.update(STAGEFRONTIER_SHM_DIR=args.work, STAGEFRONTIER_CAPTURE_DIR=captures,
                      MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")

    import stagefrontier
    from stagefrontier.hang_dump import enable_hang_dumps

    client = stagefrontier.Client(stages=[("forward", "compute"), ("grad_sync", "sync")],
                                  job_id="frjob", rank=0, local_rank=0, world_size=1,
                                  local_world_size=1, shm_dir=args.work)
    if not client.enabled:
        print("FAILED: the stub records nothing")
        return 1
    dumps = enable_hang_dumps(client)  # before the process group: the recorder's size is set
    if dumps is None:
        print("FAILED: hang dumps not enabled")
        return 1
    print("TORCH_FR_BUFFER_SIZE", os.environ.get("TORCH_FR_BUFFER_SIZE"),
          "TORCH_NCCL_TRACE_BUFFER_SIZE", os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"))

    import torch
    import torch.distributed as dist

    print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl",
          ".".join(map(str, torch.cuda.nccl.version())))
    c10d = torch._C._distributed_c10d
    print("c10d dumps:", sorted(n for n in dir(c10d) if "dump" in n.lower()))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    for step in range(args.collectives):
        client.begin_step()
        with client.stage("forward"):
            x = x * 1.0001
        with client.stage("grad_sync"):
            dist.all_reduce(x)
        client.end_step()
    torch.cuda.synchronize()

    request_dump(os.path.join(args.work, "stagefrontier.frjob.seg"), 0, 5)
    t0 = time.time()
    os.kill(os.getpid(), signal.SIGUSR2)
    stacks = os.path.join(captures, "frjob", "stacks_rank0_capture5.txt")
    recorder = os.path.join(captures, "frjob", "flightrec_rank0_capture5.json")
    ok = True
    if wait_for(stacks, 10):
        print(f"stacks file after {time.time() - t0:.3f} s:")
        print(open(stacks).read()[:1500])
    else:
        print("FAILED: no stacks file")
        ok = False
    if wait_for(recorder, 15):
        print(f"flight recorder dump after {time.time() - t0:.3f} s,",
              os.path.getsize(recorder), "bytes")
        with open(recorder) as f:
            dump = json.load(f)
        entries = dump.get("entries", [])
        print("keys:", sorted(dump.keys()), "entries:", len(entries))
        for e in entries[-3:]:
            print({k: e.get(k) for k in ("record_id", "collective_seq_id", "profiling_name",
                                          "state", "time_created_ns", "duration_ms")})
        names = [e.get("profiling_name", "") for e in entries]
        reduces = sum("all_reduce" in n for n in names)
        print("all-reduces in the dump:", reduces)
        if reduces < args.collectives:
            print(f"FAILED: {reduces} all-reduces in the dump, {args.collectives} made")
            ok = False
    else:
        print("FAILED: no flight recorder dump")
        ok = False
    dumps.close()
    dist.destroy_process_group()
    client.close()
    print("gpu_flight_recorder", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
