"""Profiler captures on request: when the coordinator asks this rank for a detailed trace of
steps FIRST..LAST (`sfctl control --trace-rank R --trace-steps FIRST:LAST`, or the capture
policy after a verdict), torch.profiler runs for exactly those steps and the Chrome trace is
written to the capture directory, in a folder named after the job, as
<job>/trace_rank<R>_step<FIRST>.json (written under a temporary name, then renamed, so the
sidecar, which sends finished files to the coordinator, never reads half a file). The job's
folder must be this process's user's; nothing in it is opened through a link another user
could plant (the folder is opened without following links and the trace written through its
descriptor, the temporary file created exclusively).

Each captured step is a "ProfilerStep#<N>" range with the stub's step number N, each stage
a "stagefrontier:<stage>" range and, when the instrumentation knows the model, each module's
forward a "nn.Module: <name> (<Class>)" range (module_ranges.py), so the trace reduces to the
stub's stages and its operators can be compared with other ranks' by module and call path
(`stagefrontier compare-ops`, docs/cli.md).

A capture never stops or breaks training: a profiler that is already running (the script
profiles itself), or that fails to start or to write, ends the capture as failed with the
reason, and training goes on. Each state is answered to the coordinator through the stub
(`answer`: running, done with the trace's size, failed with busy/start/write), which shows it
per rank in `sfctl captures`. The directory is STAGEFRONTIER_CAPTURE_DIR, by default
"stagefrontier-captures" beside the segment (STAGEFRONTIER_SHM_DIR, else /dev/shm).
"""
import os
import sys
import time
import weakref


def max_steps():
    """Steps one capture holds at most (STAGEFRONTIER_CAPTURE_MAX_STEPS, default 200): the
    profiler keeps every event of its steps in the trainer's memory until the capture ends, and
    the trace is written on the training thread, so a window of thousands of steps (a request
    may ask up to 10,000) would cost the trainer gigabytes and a long pause. A longer window is
    cut: its first steps are written, the rest is not captured."""
    try:
        return max(1, int(os.environ.get("STAGEFRONTIER_CAPTURE_MAX_STEPS", "200")))
    except ValueError:
        return 200


def default_directory():
    return os.environ.get("STAGEFRONTIER_CAPTURE_DIR") or os.path.join(
        os.environ.get("STAGEFRONTIER_SHM_DIR", "/dev/shm"), "stagefrontier-captures")


class TraceCapture:
    """Follows the stub's trace window step by step (`on_step_begin` / `on_step_end`)."""

    def __init__(self, rank, directory=None, warn=None, job=None, answer=None, modules=None,
                 busy=None):
        self.rank = rank
        # busy(): a profiler of the script's is started (stagefrontier.torch tracks them), even
        # one whose schedule has not begun recording yet.
        self._busy = busy or (lambda: False)
        self.starting = False  # our own profiler is being started (not the script's)
        # modules(): the models whose submodules' forwards become named ranges (None: no
        # module ranges).
        self._modules = modules
        self.module_ranges = None
        # answer(request_first_step, state, failure, bytes): the stub's Client.answer_capture.
        self._answer_to = answer
        self.request_first = None  # the first step of the request being captured
        self.directory = directory or default_directory()
        if job:
            self.directory = os.path.join(self.directory, job)
        self._warn = warn or (lambda msg: print(f"stagefrontier.torch: {msg}", file=sys.stderr,
                                                flush=True))
        self.profiler = None
        self.first_step = None
        self.last_step = None
        self.step_range = None
        self.refused_from = None  # the window's first step, once it failed: no retry per step
        self._refused_request = None  # the request that failed (a new one is tried)
        self._forked = False  # in a child forked from the process that made this
        # A DataLoader worker forked while a capture runs would inherit the profiler, on, and
        # record every operation for its whole life: the child turns it off.
        me = weakref.ref(self)

        def in_child():
            c = me()
            if c is not None:
                c._forget_in_child()

        try:
            os.register_at_fork(after_in_child=in_child)
        except Exception:
            pass
        self.max_steps = max_steps()
        self.done = []    # (first_step, last_step, path, bytes)
        self.failed = []  # (first_step, reason)

    @property
    def active(self):
        return self.profiler is not None

    def on_step_begin(self, step, wanted, request_first=None):
        """At the start of step `step`; `wanted`: the stub says this step is to be captured;
        `request_first`: the first step of the request's window (for the answer)."""
        if self._forked:
            return
        if not wanted:
            if self.profiler is not None:
                self.finish()
            self.refused_from = self._refused_request = None
            return
        if self.refused_from is not None and request_first is not None and \
                request_first != self._refused_request:
            self.refused_from = None  # a new request replaced the one that failed: try it
        if self.profiler is not None and request_first is not None and \
                request_first != self.request_first:
            self.finish()  # a new request replaced the one running
        if self.profiler is not None and step - self.first_step >= self.max_steps:
            self._cut(step)
            return
        if self.profiler is None and self.refused_from is None:
            self.request_first = step if request_first is None else request_first
            self._start(step)
        if self.profiler is not None:
            self.last_step = step
            try:
                from torch.autograd.profiler import record_function

                self.step_range = record_function(f"ProfilerStep#{step}")
                self.step_range.__enter__()
            except Exception as e:  # the step marks the trace only: never stop training
                self.step_range = None
                self._warn(f"capture: no step range for step {step} ({e})")

    def on_step_end(self):
        if self.step_range is not None:
            try:
                self.step_range.__exit__(None, None, None)
            except Exception:
                pass
            self.step_range = None

    def _start(self, step):
        try:
            import torch

            if torch.autograd._profiler_enabled() or self._busy():
                self._fail(step, "the profiler is busy (the script profiles itself)", "busy")
                return
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=activities)
            self.starting = True
            try:
                prof.start()
            finally:
                self.starting = False
        except Exception as e:
            self._fail(step, f"the profiler did not start: {e}", "start")
            return
        self.profiler = prof
        if self._modules is not None:
            from stagefrontier.torch.module_ranges import ModuleRanges

            self.module_ranges = ModuleRanges(self._modules, warn=self._warn)
            self.module_ranges.start()
        self.first_step = step
        self.last_step = step
        self._answer("running")

    def finish(self):
        """Stops the running capture and writes its trace (also at exit)."""
        prof, first, last = self.profiler, self.first_step, self.last_step
        if prof is None or self._forked:
            return
        self.on_step_end()
        if self.module_ranges is not None:
            self.module_ranges.stop()
            self.module_ranges = None
        self.profiler = None
        started = time.monotonic()
        try:
            prof.stop()
            path, size = self._write(prof, f"trace_rank{self.rank}_step{first}.json")
        except Exception as e:
            self._fail(first, f"the trace was not written: {e}", "write")
            return
        self.done.append((first, last, path, size))
        self._answer("done", nbytes=size)
        self._warn(f"captured steps {first}..{last} of rank {self.rank}: {path} ({size} bytes, "
                   f"stopped and written in {time.monotonic() - started:.3f} s)")

    def _write(self, prof, name):
        """Writes the trace as `name` in the job's folder (made if missing); returns (path,
        bytes). The profiler exports into the temporary file through /proc/self/fd, which
        reopens that very file: no link in the folder is followed (evidence_file.py)."""
        from stagefrontier.evidence_file import write_in_own_folder

        size = write_in_own_folder(
            self.directory, name, lambda fd: prof.export_chrome_trace(f"/proc/self/fd/{fd}"),
            create=True)
        return os.path.join(self.directory, name), size

    def _forget_in_child(self):
        """In a forked child: the parent's capture is not this process's. The profiler running
        at the fork is turned off (it would record the worker's every operation), and nothing
        is written or answered from here."""
        self._forked = True
        prof, self.profiler = self.profiler, None
        ranges, self.module_ranges = self.module_ranges, None
        self.step_range = None
        self._answer_to = None
        try:
            if ranges is not None:
                ranges.stop()
            if prof is not None:
                import torch

                if torch.autograd._profiler_enabled():
                    torch.autograd._disable_profiler()
        except Exception:
            pass

    def _cut(self, step):
        """The capture reached max_steps at `step`: written as it is, and the rest of its
        request's window is not captured (a new request is)."""
        first = self.first_step
        self._warn(f"capture from step {first} cut at {self.max_steps} steps "
                   "(STAGEFRONTIER_CAPTURE_MAX_STEPS): the profiler holds a capture's every "
                   "event in this process's memory")
        self.finish()
        self.refused_from = step
        self._refused_request = self.request_first

    def _fail(self, first_step, reason, failure):
        self.refused_from = first_step
        self._refused_request = self.request_first
        self.failed.append((first_step, reason))
        self._warn(f"capture from step {first_step} failed: {reason}; training goes on")
        self._answer("failed", failure=failure)

    def _answer(self, state, failure="", nbytes=0):
        if self._answer_to is None or self.request_first is None:
            return
        try:
            self._answer_to(self.request_first, state, failure, nbytes)
        except Exception as e:  # an answer is a courtesy to the coordinator, never a failure
            self._warn(f"capture answer not given ({e})")

    def summary(self):
        return {"captures_done": len(self.done), "captures_failed": len(self.failed),
                "capture_bytes": sum(d[3] for d in self.done)}
