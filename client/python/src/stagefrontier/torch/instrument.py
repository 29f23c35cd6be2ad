"""Hooks that turn a PyTorch training loop into StageFrontier stage marks.

Stages (schema order): data (io), forward (compute), backward (compute), grad_sync (sync),
optimizer (compute).

* data: each DataLoader iterator `__next__`.
* forward: `DistributedDataParallel.forward` (or the model passed to `instrument`).
* backward: `Tensor.backward` / `torch.autograd.backward`, up to the moment the last gradient
  was ready for DDP's all-reduce: by default a hook after each parameter's gradient
  accumulator (where DDP's reducer launches its buckets), with the DDP communication hook
  (comm_hook=True, STAGEFRONTIER_TORCH_COMM_HOOK=1, `--comm-hook`) the last bucket's launch;
* grad_sync: from there until backward returns, i.e. the wait for the all-reduce. With
  grad_ready=False (STAGEFRONTIER_TORCH_GRAD_READY=0) and no comm hook, grad_sync is empty
  and backward, which then contains the wait, is declared `mixed`.
* optimizer: `Optimizer.step`; the step ends when it returns, and the next one begins.

Hangs (stagefrontier/hang_dump.py): faulthandler is registered for SIGUSR2, so that at a
stall the coordinator can ask this rank for every thread's stack (and, with NCCL, torch's
Flight Recorder dump); STAGEFRONTIER_HANG_DUMPS=0 turns it off.

Captures (capture.py): when the coordinator asks this rank for a profiler trace of a few
steps, torch.profiler runs for exactly those steps. captures=False (STAGEFRONTIER_CAPTURES=0,
`--no-captures`) turns that off, as a script that runs its own torch.profiler should: the
rank then tells the coordinator it cannot capture, and is never asked.

With annotate=True (STAGEFRONTIER_TORCH_ANNOTATE=1, `--annotate`), each stage is also a
torch.profiler range named "stagefrontier:<stage>", so that a profiler trace reduces to the
same stages (`stagefrontier reduce-trace`, docs/cli.md). It costs a record_function per stage:
turn it on while profiling.

Time outside any stage counts toward the stage entered next (docs/link-the-stub.md). The
communication hook does what DDP's default hook does (average, then all-reduce) and records
when each bucket was launched. It is off by default: with Debian's torch 1.13 and Gloo, a
Python comm hook made destroy_process_group hang in about one run in three (Gloo's worker
thread waits for the GIL while the main thread joins it); scripts with their own comm hook
must leave it off.
"""
import contextlib
import functools
import os
import sys
import time

DEFAULT_STAGES = [
    ("data", "io"),
    ("forward", "compute"),
    ("backward", "compute"),
    ("grad_sync", "sync"),
    ("optimizer", "compute"),
]

_ACTIVE = None


def _warn(msg):
    print(f"stagefrontier.torch: {msg}", file=sys.stderr, flush=True)


class Instrumentation:
    """One per process. `install()` patches PyTorch; the methods are the explicit API."""

    def __init__(self, stages=None, extra_stages=(), comm_hook=None, annotate=None,
                 grad_ready=None, captures=None, **client_kwargs):
        if comm_hook is None:
            comm_hook = os.environ.get("STAGEFRONTIER_TORCH_COMM_HOOK", "0") == "1"
        self.comm_hook = comm_hook
        # Without the comm hook, the end of local backward work is the last gradient ready
        # for the reducer (no Python runs on Gloo's threads, so no teardown hang).
        if grad_ready is None:
            grad_ready = os.environ.get("STAGEFRONTIER_TORCH_GRAD_READY", "1") == "1"
        self.grad_ready = grad_ready and not comm_hook
        self.grad_ready_ns = None  # the last gradient accumulated in this backward
        # Gradients DDP waits for, and how many this backward has accumulated: when all are,
        # local work is done and the rank waits for the all-reduce (shown live as grad_sync,
        # so that a stall verdict tells a rank stuck in backward from ranks waiting there).
        self._grad_params = 0
        self._grads_ready = 0
        # Also emit each stage as a torch.profiler range "stagefrontier:<stage>", so that a
        # profiler trace can be reduced to the same stages (`stagefrontier reduce-trace`).
        if annotate is None:
            annotate = os.environ.get("STAGEFRONTIER_TORCH_ANNOTATE", "0") == "1"
        self.annotate = annotate
        if stages is None:
            # Without a way to see the end of local work, backward contains the all-reduce
            # wait: say so (mixed).
            stages = DEFAULT_STAGES if comm_hook or self.grad_ready else [
                (n, "mixed" if n == "backward" else k) for n, k in DEFAULT_STAGES]
        self.stages = list(stages) + list(extra_stages)
        self.names = {name for name, _ in self.stages}
        self.client = None
        try:
            import stagefrontier

            self.client = stagefrontier.Client(stages=self.stages, **client_kwargs)
        except Exception as e:  # never stop training for the stub
            _warn(f"not recording ({e}); training goes on uninstrumented")
        self.in_step = False
        self.bucket_launch_ns = []  # this step's all-reduce launches
        # With the comm hook, each bucket's all-reduce is also reported to the collective probe
        # ring (docs/probe.md): the same intervals the NCCL probe writes, from Gloo.
        self.probe = None
        self._probe_lock = None
        self._probe_pending = {}  # seq -> launch time, for the resolved-through watermark
        self._probe_seq = 0
        if comm_hook and self.client is not None and self.client.enabled:
            try:
                import threading

                self.probe = self.client.probe_ring()
                self._probe_lock = threading.Lock()
            except Exception as e:  # the probe is evidence: never stop training for it
                _warn(f"collective intervals not reported ({e})")
        self._forward_depth = 0
        self._backward_depth = 0
        self._models = []  # weak references: the DDP models built and the model installed
        self._patches = []
        # Profiler captures the coordinator asks for (capture.py). A script that runs its own
        # torch.profiler should turn them off (captures=False, STAGEFRONTIER_CAPTURES=0,
        # `--no-captures`): two profilers cannot run at once, and ours could be the one
        # running when the script starts its own.
        if captures is None:
            captures = os.environ.get("STAGEFRONTIER_CAPTURES", "1") != "0"
        self.capture = None
        if captures and self.client is not None and self.client.enabled:
            from stagefrontier.torch.capture import TraceCapture

            self.capture = TraceCapture(self.client.rank, warn=_warn, job=self.client.job_id,
                                        answer=self.client.answer_capture,
                                        modules=self._live_models)
            self.client.declare_capture_handler()
        # Every thread's stack when the coordinator asks at a hang (hang_dump.py);
        # STAGEFRONTIER_HANG_DUMPS=0 turns it off.
        self.hang_dumps = None
        if self.client is not None and self.client.enabled:
            from stagefrontier.hang_dump import enable_hang_dumps

            self.hang_dumps = enable_hang_dumps(self.client, warn=_warn)

    # ---- explicit API ----------------------------------------------------------------------
    def begin(self):
        """Starts a step if none is open (the hooks call it lazily)."""
        if self.client is not None and not self.in_step:
            self.bucket_launch_ns.clear()
            self.client.begin_step()
            self.in_step = True
            if self.capture is not None:
                wanted = self.client.should_capture_trace()
                window = self.client.capture_window if wanted else None
                self.capture.on_step_begin(self.client.current_step, wanted,
                                           request_first=window[0] if window else None)

    def end(self):
        """Ends the open step and publishes it."""
        if self.client is not None and self.in_step:
            if self.capture is not None:
                self.capture.on_step_end()
            self.client.end_step()
            self.in_step = False

    def step_boundary(self):
        self.end()
        self.begin()

    def annotating(self):
        """True when stages are also profiler ranges: --annotate, or a capture is running."""
        return self.annotate or (self.capture is not None and self.capture.active)

    def stage(self, name):
        """A context manager for stage `name` (a no-op when not recording)."""
        if self.client is None:
            return contextlib.nullcontext()
        self.begin()
        if self.annotating():
            return _annotated(self.client.stage(name), name)
        return self.client.stage(name)

    def mark(self, name, t_ns=None):
        """Stage `name` ended now (or at t_ns, a time.monotonic_ns() value)."""
        if self.client is None:
            return
        self.begin()
        if t_ns is None:
            self.client.mark(name)
        else:
            self.client.mark_at(name, t_ns)

    def staged(self, name):
        """A decorator running the function inside stage `name`."""

        def wrap(fn):
            @functools.wraps(fn)
            def inner(*args, **kwargs):
                with self.stage(name):
                    return fn(*args, **kwargs)

            return inner

        return wrap

    def should_capture_trace(self):
        return self.client is not None and self.client.should_capture_trace()

    def stats(self):
        if self.client is None:
            return {}
        out = dict(self.client.stats())
        if self.capture is not None:
            out.update(self.capture.summary())
        return out

    def close(self):
        """Writes a capture still running and gives the slot back (at exit).

        Python may never destroy the client at exit: without close() the next run of this
        local rank would find the slot held by a dead pid and warn that it took it over.
        """
        if self.capture is not None:
            self.capture.finish()
        if self.hang_dumps is not None:
            self.hang_dumps.close()
        if self.client is not None:
            self.client.close()

    def _live_models(self):
        """The models whose modules a capture names (DDP wrappers and the installed model)."""
        return [m for m in (ref() for ref in self._models) if m is not None]

    def _remember_model(self, model):
        import weakref

        try:
            self._models.append(weakref.ref(model))
        except TypeError:  # not weakly referenceable: its modules are named by class only
            pass

    # ---- hooks -----------------------------------------------------------------------------
    def _patch(self, owner, attr, make):
        original = getattr(owner, attr)
        if getattr(original, "_stagefrontier", False):
            return
        wrapped = make(original)
        wrapped._stagefrontier = True
        setattr(owner, attr, wrapped)
        self._patches.append((owner, attr, original))

    def install(self, model=None):
        """Patches DataLoader, DDP, backward and the optimizers. Returns self."""
        global _ACTIVE
        _ACTIVE = self
        if self.client is None:
            return self
        import torch
        import torch.utils.data.dataloader as dl

        sf = self

        def make_next(orig):
            def __next__(it):
                with sf.stage("data"):
                    return orig(it)

            return __next__

        self._patch(dl._BaseDataLoaderIter, "__next__", make_next)

        def make_forward(orig):
            def forward(module, *args, **kwargs):
                if sf._forward_depth > 0:
                    return orig(module, *args, **kwargs)
                sf._forward_depth += 1
                try:
                    with sf.stage("forward"):
                        return orig(module, *args, **kwargs)
                finally:
                    sf._forward_depth -= 1

            return forward

        from torch.nn.parallel import DistributedDataParallel as DDP

        self._patch(DDP, "forward", make_forward)
        if model is not None:
            self._remember_model(model)
            if not isinstance(model, DDP):
                self._patch(type(model), "forward", make_forward)

        def make_ddp_init(orig):
            def __init__(ddp, *args, **kwargs):
                orig(ddp, *args, **kwargs)
                sf._remember_model(ddp)
                if sf.comm_hook:
                    sf._register_comm_hook(ddp)
                elif sf.grad_ready:
                    sf._register_grad_ready_hooks(ddp)

            return __init__

        self._patch(DDP, "__init__", make_ddp_init)

        def make_backward(orig):
            def backward(*args, **kwargs):
                if sf._backward_depth > 0:
                    return orig(*args, **kwargs)
                sf.begin()
                sf._backward_depth += 1
                launches_before = len(sf.bucket_launch_ns)
                sf.grad_ready_ns = None
                sf._grads_ready = 0
                try:
                    if sf.annotating():  # a capture's trace needs the range too
                        with _profiler_range("backward"):
                            return orig(*args, **kwargs)
                    return orig(*args, **kwargs)
                finally:
                    sf._backward_depth -= 1
                    end = time.monotonic_ns()
                    launches = sf.bucket_launch_ns[launches_before:]
                    # backward: until the last gradient was handed to the all-reduce;
                    # grad_sync: the wait for it to finish.
                    if launches:
                        local_end = max(launches)
                    elif sf.grad_ready_ns is not None:
                        local_end = min(sf.grad_ready_ns, end)
                    else:
                        local_end = end
                    sf.mark("backward", local_end)
                    sf.mark("grad_sync", end)

            return backward

        self._patch(torch.Tensor, "backward", make_backward)
        self._patch(torch.autograd, "backward", make_backward)

        def make_opt_init(orig):
            def __init__(opt, *args, **kwargs):
                orig(opt, *args, **kwargs)
                cls = type(opt)
                if not getattr(cls.step, "_stagefrontier", False):

                    def make_step(step_orig):
                        def step(o, *a, **k):
                            try:
                                with sf.stage("optimizer"):
                                    return step_orig(o, *a, **k)
                            finally:
                                sf.step_boundary()

                        return step

                    sf._patch(cls, "step", make_step)

            return __init__

        self._patch(torch.optim.Optimizer, "__init__", make_opt_init)

        return self

    def _register_grad_ready_hooks(self, ddp):
        """A post-hook on each parameter's gradient accumulator, registered after DDP's own
        (which launches the buckets): the last to run marks the end of local backward work."""
        sf = self

        def ready(*_):
            now = time.monotonic_ns()
            sf.grad_ready_ns = now
            sf._grads_ready += 1
            if sf._grads_ready == sf._grad_params and sf.client is not None:
                sf.client.show_open("grad_sync", now)

        try:
            accumulators = []
            for p in ddp.module.parameters():
                if p.requires_grad:
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(ready)
                    accumulators.append(acc)  # the hooks live as long as their nodes
            ddp._stagefrontier_accumulators = accumulators
            sf._grad_params += len(accumulators)
        except Exception as e:
            _warn(f"cannot see when gradients are ready ({e}); backward then holds the "
                  "all-reduce wait and grad_sync is measured as zero")

    def _register_comm_hook(self, ddp):
        import torch.distributed as dist

        sf = self
        group = ddp.process_group

        def hook(state, bucket):
            tensor = bucket.buffer()
            tensor.div_(group.size())
            launch = time.monotonic_ns()
            sf.bucket_launch_ns.append(launch)
            seq = sf._probe_launched(launch)
            fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
            nbytes = tensor.numel() * tensor.element_size()

            def done(f):
                sf._probe_completed(seq, launch, nbytes, time.monotonic_ns())
                return f.value()[0]

            return fut.then(done)

        try:
            ddp.register_comm_hook(None, hook)
        except Exception as e:
            _warn(f"cannot register the DDP communication hook ({e}); grad_sync is then "
                  "measured as zero and the all-reduce wait counts in backward")

    def _probe_launched(self, launch_ns):
        """A bucket's all-reduce was launched: it holds the probe's watermark until done."""
        if self.probe is None:
            return -1
        with self._probe_lock:
            seq = self._probe_seq
            self._probe_seq += 1
            self._probe_pending[seq] = launch_ns
            return seq

    def _probe_completed(self, seq, launch_ns, nbytes, end_ns):
        """Reports one Gloo all-reduce (op 0): launched, started (a CPU collective starts at
        its launch) and completed, then advances the watermark past what is done."""
        if self.probe is None or seq < 0:
            return
        try:
            with self._probe_lock:
                self._probe_pending.pop(seq, None)
                self.probe.publish(op=0, nbytes=nbytes, call_ns=launch_ns, start_ns=launch_ns,
                                   end_ns=end_ns, seq=seq)
                through = min(self._probe_pending.values(), default=time.monotonic_ns())
                self.probe.resolved_through(through)
        except Exception as e:  # never let the probe break the all-reduce's future
            _warn(f"collective interval not reported ({e})")

    def uninstall(self):
        for owner, attr, original in reversed(self._patches):
            setattr(owner, attr, original)
        self._patches.clear()
        # The SIGUSR2 handler belongs to this instance's client: give it back too.
        if self.hang_dumps is not None:
            self.hang_dumps.close()
            self.hang_dumps = None


def _profiler_range(name):
    from torch.autograd.profiler import record_function

    return record_function("stagefrontier:" + name)


@contextlib.contextmanager
def _annotated(scope, name):
    """The stub's stage scope inside a profiler range of the same name."""
    with _profiler_range(name):
        with scope:
            yield


def instrument(model=None, **kwargs):
    """Creates the process's Instrumentation, installs its hooks and returns it."""
    global _ACTIVE
    if _ACTIVE is not None:
        return _ACTIVE
    return Instrumentation(**kwargs).install(model=model)
