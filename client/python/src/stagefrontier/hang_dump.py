"""Evidence at the moment of a hang: every thread's Python stack, on the coordinator's request.

    import stagefrontier
    from stagefrontier.hang_dump import enable_hang_dumps
    c = stagefrontier.Client(stages=[...])
    dumps = enable_hang_dumps(c)   # stagefrontier.torch does this by itself
    ...
    dumps.close()                  # before c.close()

When a job stalls (docs/user-guide.md "Hangs"), the coordinator asks the stuck rank and one
waiting rank for their stacks: their sidecar records the request in the rank's slot and sends
the process SIGUSR2 (only once the slot says a handler is registered, and only to a process
that maps the job's segment). Python's faulthandler, registered here, writes every thread's
stack from inside the signal handler, so it works while the main thread is blocked in C code
(a collective, a read, a lock); the stub's dump thread (client/hang_dump.h) files it as
<capture dir>/<job>/stacks_rank<R>_capture<ID>.txt, which the sidecar ships like a profiler
capture (`sfctl capture-report` shows the stuck rank's stacks beside a waiting rank's).

With NCCL, a thread here then asks torch for its NCCL Flight Recorder dump (the collectives
each rank scheduled, started and completed) and writes it beside the stacks as
flightrec_rank<R>_capture<ID>.json. The recorder must be on before the process group is
created: enable_hang_dumps sets TORCH_FR_BUFFER_SIZE (TORCH_NCCL_TRACE_BUFFER_SIZE before torch
2.8) to 2000 entries unless either is set. GPU only; checked on one H200 with torch 2.11 and
NCCL 2.28 (docs/results.md, "Again on a GPU"); never with several GPUs, never with an older
torch.

STAGEFRONTIER_HANG_DUMPS=0 turns the whole of it off; STAGEFRONTIER_FLIGHT_RECORDER=0 the
flight recorder dump only. A script that uses SIGUSR2 itself keeps it: nothing is registered
over a handler the script installed first (enable_hang_dumps warns and returns None).
"""
import atexit
import faulthandler
import os
import signal
import sys
import threading

FLIGHT_RECORDER_ENTRIES = "2000"
NOT_NCCL = "not an NCCL job: "  # dump_flight_recorder's answers that are not worth a warning


def _default_warn(msg):
    print(f"stagefrontier: {msg}", file=sys.stderr, flush=True)


def flight_recorder_wanted():
    return os.environ.get("STAGEFRONTIER_FLIGHT_RECORDER", "1") != "0"


def _torch_version():
    try:
        from importlib.metadata import version

        return tuple(int(x) for x in version("torch").split("+")[0].split(".")[:2])
    except Exception:
        return None


def turn_on_flight_recorder():
    """Asks torch to keep its NCCL Flight Recorder (read when the process group is made):
    TORCH_FR_BUFFER_SIZE, and the older TORCH_NCCL_TRACE_BUFFER_SIZE for a torch before 2.8
    (2.11 warns that the old name is deprecated), unless the user set either."""
    if not flight_recorder_wanted():
        return
    if "TORCH_FR_BUFFER_SIZE" in os.environ or "TORCH_NCCL_TRACE_BUFFER_SIZE" in os.environ:
        return
    os.environ["TORCH_FR_BUFFER_SIZE"] = FLIGHT_RECORDER_ENTRIES
    v = _torch_version()
    if v is None or v < (2, 8):
        os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = FLIGHT_RECORDER_ENTRIES


def dump_flight_recorder(path):
    """Writes torch's NCCL Flight Recorder dump (JSON) to `path`, under a temporary name then
    renamed. Returns None when written, else why not (no NCCL process group, a torch without
    the JSON dump, the dump failed)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return NOT_NCCL + "torch is not loaded"
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return NOT_NCCL + "no process group"
        if "nccl" not in str(dist.get_backend()).lower():
            return NOT_NCCL + f"the process group's backend is {dist.get_backend()}"
        c10d = torch._C._distributed_c10d
        # NCCL's own recorder: torch 2.11's _dump_fr_trace_json is another one (0 entries for
        # an NCCL job on the H200, docs/results.md "Again on a GPU").
        dump = getattr(c10d, "_dump_nccl_trace_json", None)
        if dump is None:
            return f"torch {torch.__version__} has no _dump_nccl_trace_json"
        try:
            text = dump(includeCollectives=True, onlyActive=False)
        except TypeError:
            text = dump()
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        from stagefrontier.evidence_file import write_all, write_in_own_folder

        write_in_own_folder(os.path.dirname(path) or ".", os.path.basename(path),
                            lambda fd: write_all(fd, text))
        return None
    except Exception as e:  # evidence only: never let it hurt the trainer
        return f"the dump failed ({e})"


class HangDumps:
    """The registered handler and the flight recorder thread of one client."""

    def __init__(self, client, directory, warn):
        self.client = client
        self.rank = client.rank
        self.directory = directory
        self._warn = warn
        self._closing = False
        self.flight_recorder_dumps = 0
        self._thread = None
        if flight_recorder_wanted():
            self._thread = threading.Thread(target=self._flight_recorder_loop,
                                            name="stagefrontier-flight-recorder", daemon=True)
            self._thread.start()
        # At exit, also after an exception: the thread must not keep the client alive past the
        # interpreter's end, or its slot is never released (the rank then reads dead, not
        # finished).
        atexit.register(self.close)

    def _flight_recorder_loop(self):
        client = self.client
        seen = 0  # dumps completed so far: none is missed between two waits
        # A client closed without close() here first answers at once: stop, never spin.
        while not self._closing and client.enabled:
            try:
                capture, seen = client.wait_hang_dump(1.0, seen)
            except Exception:
                return
            if capture == 0 or self._closing:
                continue
            name = f"flightrec_rank{self.rank}_capture{capture}.json"
            why = dump_flight_recorder(os.path.join(self.directory, name))
            if why is None:
                self.flight_recorder_dumps += 1
            elif not why.startswith(NOT_NCCL):
                self._warn(f"no NCCL flight recorder dump for capture {capture}: {why}")

    def close(self):
        """Stops taking dump requests: the slot stops naming the signal first, then the handler
        goes (restoring the default action, which would end the process, only once the
        sidecar no longer sends it), then the thread (before the client is closed)."""
        if self._closing:
            return
        self._closing = True
        try:
            self.client.unpublish_hang_dumps()
        except Exception:
            pass
        try:
            # faulthandler's unregister puts back the action it saw at register (the default):
            # over a handler the script installed since (signal.signal: getsignal then names
            # it; faulthandler's own leaves SIG_DFL there), that would end the process at the
            # script's next SIGUSR2. Left registered then: the script's handler is what runs.
            if signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL:
                faulthandler.unregister(signal.SIGUSR2)
        except Exception:
            pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.client = None
        atexit.unregister(self.close)


def enable_hang_dumps(client, warn=None, directory=None):
    """Registers faulthandler for SIGUSR2 into the stub's dump pipe and tells the sidecar that
    this process takes stack dump requests. Returns a HangDumps, or None (warned) when the
    client records nothing, SIGUSR2 already has a handler, or the stub refuses."""
    warn = warn or _default_warn
    if os.environ.get("STAGEFRONTIER_HANG_DUMPS", "1") == "0":
        return None
    if client is None or not client.enabled or not hasattr(client, "enable_hang_dumps"):
        return None
    try:
        current = signal.getsignal(signal.SIGUSR2)
    except Exception:
        current = None
    # None: a handler installed from C (the stub checks its sigaction too).
    if current is not signal.SIG_DFL:
        warn("SIGUSR2 has a handler already: no stack dumps at hangs (the script keeps it)")
        return None
    try:
        fd = client.enable_hang_dumps(signal=int(signal.SIGUSR2), install_handler=False)
        faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True, chain=False)
        client.publish_hang_dumps()
    except Exception as e:  # evidence only: never stop training for it
        warn(f"no stack dumps at hangs ({e})")
        return None
    if directory is None:
        from stagefrontier.torch.capture import default_directory

        directory = os.path.join(default_directory(), client.job_id)
    turn_on_flight_recorder()
    return HangDumps(client, directory, warn)
