"""Hooks that turn a PyTorch training loop into StageFrontier stage marks.

Stages (schema order): data (io), forward (compute), backward (compute), grad_sync (sync),
optimizer (compute).

* data: each DataLoader iterator `__next__`.
* buffer_sync (sync), only for a model with buffers (BatchNorm's running statistics) that DDP
  broadcasts from rank 0 at the start of every forward: DDP's work before the module's forward,
  i.e. the other ranks' wait for that broadcast. Added before forward when such a DDP is built
  before the client is created (the default: the client waits for the first DDP) and the stages
  are the default ones; otherwise the wait stays inside forward.
* forward: `DistributedDataParallel.forward` (or the model passed to `instrument`).
* backward: `Tensor.backward` / `torch.autograd.backward`, up to the moment the last gradient
  was ready for DDP's all-reduce: by default a hook after each parameter's gradient
  accumulator (where DDP's reducer launches its buckets), with the DDP communication hook
  (comm_hook=True, STAGEFRONTIER_TORCH_COMM_HOOK=1, `--comm-hook`) the last bucket's launch;
* grad_sync: from there until backward returns, i.e. the wait for the all-reduce. With
  grad_ready=False (STAGEFRONTIER_TORCH_GRAD_READY=0) and no comm hook, grad_sync is empty
  and backward, which then contains the wait, is declared `mixed`.
  A backward that raises leaves open the stage it raised in: grad_sync when every gradient
  was ready (with the comm hook: once a bucket was launched), or when the exception is a
  collective's failure (a peer gone, a Gloo or NCCL error: stagefrontier.collective_failure);
  backward otherwise.
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

3D-parallel layout (docs/user-guide.md, "3D-parallel jobs"): inferred from the process group
the script gives to DDP, whose ranks are this rank's data-parallel replicas (infer_layout: D
ranks s apart from f, in a world of W, are tensor rank f % s of s in pipeline stage
f // (s*D) of W // (s*D)). Not inferred: from a DDP over the whole world (data parallel only:
no layout), from groups not given to DDP, from irregular groups (the rank says why on stderr).
The client, whose layout is fixed, is thus created at the first DDP, or at the first step if
that comes first (then without a layout). layout={...} or STAGEFRONTIER_LAYOUT
("pipeline_stage=1,pipeline_stages=2,tensor_rank=0,tensor_size=1") wins;
STAGEFRONTIER_TORCH_INFER_LAYOUT=0 turns inference off. `layout_note` says what was done.

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
import threading
import time
import weakref

import stagefrontier

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


LAYOUT_KEYS = ("pipeline_stage", "pipeline_stages", "tensor_rank", "tensor_size")


def check_layout(layout):
    """A layout dict completed (missing keys: 0, 1, 0, 1) and checked against itself; raises
    ValueError or TypeError. Whether the sizes divide the world is the stub's to check."""
    if not isinstance(layout, dict):
        raise TypeError(f"a layout is a dict with keys {', '.join(LAYOUT_KEYS)}, "
                        f"not {type(layout).__name__}")
    out = {"pipeline_stage": 0, "pipeline_stages": 1, "tensor_rank": 0, "tensor_size": 1}
    for key, value in layout.items():
        if key not in out:
            raise ValueError(f"unknown key {key!r} (keys: {', '.join(LAYOUT_KEYS)})")
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{key} must be an int, not {type(value).__name__}")
        out[key] = value
    for count, index in (("pipeline_stages", "pipeline_stage"), ("tensor_size", "tensor_rank")):
        if out[count] < 1:
            raise ValueError(f"{count} {out[count]} is not at least 1")
        if not 0 <= out[index] < out[count]:
            raise ValueError(f"{index} {out[index]} is outside 0..{out[count] - 1}")
    return out


def parse_layout(text):
    """STAGEFRONTIER_LAYOUT: "pipeline_stage=0,pipeline_stages=2,tensor_rank=0,tensor_size=1"
    (missing keys: 0, 1, 0, 1). Raises ValueError on anything else."""
    layout = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq or not value.isdigit() or not value.isascii():
            raise ValueError(f"{item.strip()!r} is not KEY=NUMBER")
        if key in layout:
            raise ValueError(f"{key} given twice")
        layout[key] = int(value)
    return check_layout(layout)


def infer_layout(group_ranks, world, rank):
    """This rank's layout from the global ranks of the process group its DDP all-reduces over
    (its data-parallel replicas): (layout dict or None, a note that says why).

    Ranks are taken as tensor rank fastest, then data-parallel replica, then pipeline stage
    (Megatron's order): a group of D ranks spaced by s is tensor rank (first % s) of tensor_size
    s, in pipeline stage first // (s * D) of world // (s * D). Contiguous groups (s = 1) are
    thus pipeline stages and strided ones tensor ranks; which of the two a role really is
    cannot be told from the group, only that its ranks are replicas of one another."""
    ranks = sorted(group_ranks)
    shown = _ranks_text(ranks)
    if len(set(ranks)) != len(ranks) or any(r < 0 or r >= world for r in ranks):
        return None, f"no layout: DDP group {shown} is not a set of ranks of world {world}"
    if rank not in ranks:
        return None, f"no layout: rank {rank} is not in its DDP group {shown}"
    d = len(ranks)
    if d == world:
        return None, "no layout: DDP spans the whole world (data parallel only)"
    if d == 1:
        return None, (f"no layout: DDP group {shown} has one rank (no data-parallel replica to "
                      "compare it with)")
    stride = ranks[1] - ranks[0]
    if any(b - a != stride for a, b in zip(ranks, ranks[1:])):
        return None, f"no layout: DDP group {shown} is not evenly spaced"
    block = stride * d  # the ranks of one pipeline stage
    if world % block != 0:
        return None, (f"no layout: DDP group {shown} ({d} ranks {stride} apart) does not divide "
                      f"world {world}")
    if ranks[0] % block >= stride:  # the group would straddle two pipeline stages
        return None, (f"no layout: DDP group {shown} does not start a block of {block} ranks "
                      "(tensor, then data, then pipeline order)")
    layout = {"pipeline_stage": ranks[0] // block, "pipeline_stages": world // block,
              "tensor_rank": ranks[0] % stride, "tensor_size": stride}
    return layout, f"inferred {_layout_text(layout)} from DDP group {shown}"


def _new_client(stages, layout, source, kwargs):
    """stagefrontier.Client with the layout and its source; a stub built before
    layout_source existed takes the layout alone (the coordinator then shows no source)."""
    import stagefrontier

    try:
        return stagefrontier.Client(stages=stages, layout=layout, layout_source=source, **kwargs)
    except TypeError as e:
        if "layout_source" not in str(e):
            raise
        return stagefrontier.Client(stages=stages, layout=layout, **kwargs)


def _layout_text(layout):
    return ",".join(f"{k}={layout[k]}" for k in LAYOUT_KEYS if k in layout)


def _ranks_text(ranks, most=8):
    ranks = list(ranks)
    if len(ranks) <= most:
        return "[" + ", ".join(map(str, ranks)) + "]"
    head = ", ".join(map(str, ranks[:most - 2]))
    return f"[{head}, ..., {ranks[-1]}] ({len(ranks)} ranks)"


def _ddp_group_ranks(ddp):
    """(global ranks of the DDP's process group, world size, this rank)."""
    import torch.distributed as dist

    pg = getattr(ddp, "process_group", None)
    world, rank = dist.get_world_size(), dist.get_rank()
    if pg is None:
        return list(range(world)), world, rank
    if hasattr(dist, "get_process_group_ranks"):
        ranks = dist.get_process_group_ranks(pg)
    else:  # torch 1.13: global rank -> group rank
        from torch.distributed import distributed_c10d as c10d

        ranks = c10d._pg_group_ranks[pg].keys()
    return sorted(int(r) for r in ranks), world, rank


class Instrumentation:
    """One per process. `install()` patches PyTorch; the methods are the explicit API."""

    def __init__(self, stages=None, extra_stages=(), comm_hook=None, annotate=None,
                 grad_ready=None, captures=None, layout=None, infer_layout=None,
                 **client_kwargs):
        if comm_hook is None:
            comm_hook = os.environ.get("STAGEFRONTIER_TORCH_COMM_HOOK", "0") == "1"
        self.comm_hook = comm_hook
        # Without the comm hook, the end of local backward work is the last gradient ready
        # for the reducer (no Python runs on Gloo's threads, so no teardown hang).
        if grad_ready is None:
            grad_ready = os.environ.get("STAGEFRONTIER_TORCH_GRAD_READY", "1") == "1"
        self.grad_ready = grad_ready and not comm_hook
        self.grad_ready_ns = None  # the last gradient accumulated in this backward
        # Gradients each DDP model delivers in a backward, and how many this backward has
        # accumulated: when every model that ran forward since the last backward has all of
        # its gradients, local work is done and the rank waits for the all-reduce (shown live
        # as grad_sync, so that a stall verdict tells a rank stuck in backward from ranks
        # waiting there). Keyed by a number each DDP gets (ddp._stagefrontier_key; id() is
        # reused once a model is freed); see _all_grads_ready.
        self._grad_params = {}  # every parameter that requires a gradient
        self._grad_counts = {}  # gradients seen in the last completed backwards (at most 32)
        self._grad_most = {}  # the most of _grad_counts' (read at every gradient)
        self._grads_seen = {}  # in this backward
        self._forwarded = set()  # models whose forward ran with grad since the last backward
        self._grad_hooks = {}  # key -> the hooks' handles, removed when the DDP is freed
        self._ddps_freed = []  # keys of DDPs freed since the last backward (weakref.finalize)
        self._next_key = 0
        # Also emit each stage as a torch.profiler range "stagefrontier:<stage>", so that a
        # profiler trace can be reduced to the same stages (`stagefrontier reduce-trace`).
        if annotate is None:
            annotate = os.environ.get("STAGEFRONTIER_TORCH_ANNOTATE", "0") == "1"
        self.annotate = annotate
        stages_given = stages
        if stages is None:
            # Without a way to see the end of local work, backward contains the all-reduce
            # wait: say so (mixed).
            stages = DEFAULT_STAGES if comm_hook or self.grad_ready else [
                (n, "mixed" if n == "backward" else k) for n, k in DEFAULT_STAGES]
        self.stages = list(stages) + list(extra_stages)
        self.names = {name for name, _ in self.stages}
        # DDP broadcasts a model's buffers (BatchNorm's running statistics) from rank 0 at the
        # start of every forward: a wait on the other ranks inside a compute stage. With the
        # default stages and such a DDP seen before the client is created, the schema gains a
        # sync stage `buffer_sync` before forward that holds DDP's work before the module's
        # own forward (_forward_split).
        self._auto_stages = stages_given is None
        self._buffer_sync = False  # a DDP that broadcasts buffers was seen
        self._buffer_sync_open = False  # in a DDP forward, before the module's forward ran
        self._buffer_sync_range = None  # its profiler range, when annotating
        # Profiler captures the coordinator asks for (capture.py). A script that runs its own
        # torch.profiler should turn them off (captures=False, STAGEFRONTIER_CAPTURES=0,
        # `--no-captures`): two profilers cannot run at once, and ours could be the one
        # running when the script starts its own.
        if captures is None:
            captures = os.environ.get("STAGEFRONTIER_CAPTURES", "1") != "0"
        self._captures = captures
        self._client_kwargs = client_kwargs
        self.in_step = False
        self.bucket_launch_ns = []  # this step's all-reduce launches
        # With the comm hook, each bucket's all-reduce is also reported to the collective probe
        # ring (docs/probe.md): the same intervals the NCCL probe writes, from Gloo.
        self._probe = None
        self._probe_lock = None
        self._probe_pending = {}  # seq -> launch time, for the resolved-through watermark
        self._probe_seq = 0
        self._forward_depth = 0
        self._backward_depth = 0
        self._optimizer_depth = 0
        self._user_profilers = weakref.WeakSet()  # the script's, started and not stopped
        self._models = []  # weak references: the DDP models built and the model installed
        self._patches = []
        self._capture = None
        # Every thread's stack when the coordinator asks at a hang (hang_dump.py);
        # STAGEFRONTIER_HANG_DUMPS=0 turns it off. NCCL's Flight Recorder is asked for now:
        # torch reads its setting when the process group is made, and the client (which
        # enables the dumps) usually comes after the script's init_process_group.
        self._hang_dumps = None
        if os.environ.get("STAGEFRONTIER_HANG_DUMPS", "1") != "0":
            try:
                from stagefrontier.hang_dump import turn_on_flight_recorder

                turn_on_flight_recorder()
            except Exception:  # evidence only
                pass
        # The layout is fixed when the stub's client is created. Unless it is given, the client
        # waits for the script's first DDP, whose process group tells the rank's role, or for
        # the first step, whichever comes first (_start_client).
        self._client = None
        self._pending = False
        self._pid = os.getpid()  # a forked DataLoader worker must not create a client
        self._lock = threading.Lock()
        self.layout = None  # the layout declared, once the client is created
        self.layout_note = ""
        self._ddp_group = None  # the first DDP's process group (global ranks)
        self._group_warned = False
        if infer_layout is None:
            infer_layout = os.environ.get("STAGEFRONTIER_TORCH_INFER_LAYOUT", "1") != "0"
        self._infer = False  # the layout is the first DDP's to tell
        explicit, source = layout, "layout="
        if explicit is None and os.environ.get("STAGEFRONTIER_LAYOUT"):
            explicit, source = os.environ["STAGEFRONTIER_LAYOUT"], "STAGEFRONTIER_LAYOUT"
        if explicit is not None:
            try:
                explicit = (parse_layout(explicit) if isinstance(explicit, str)
                            else check_layout(explicit))
            except (TypeError, ValueError) as e:
                _warn(f"{source} ignored ({e}); " + (
                    "inferring the layout from the DDP process group" if infer_layout
                    else "no layout declared"))
                explicit = None
        if explicit is not None:
            self._start_client(explicit, f"{_layout_text(explicit)} (from {source})",
                               "declared" if source == "layout=" else "environment")
        elif not infer_layout:
            self._start_client(None, "no layout: inference off", "inference_off")
        else:
            self._infer = True
            self._pending = True
            self.layout_note = "not yet known: waiting for the first DDP or step"

    def _start_client(self, layout, note, source):
        """Creates the stub's client with `layout` (None: none), and what needs the client.
        `source`: how the layout came, or why none (Client's layout_source: sfctl health shows
        it, so that what could not be inferred is seen on the coordinator too)."""
        self._pending = False
        self.layout_note = note
        if self._auto_stages and self._buffer_sync and "buffer_sync" not in self.names:
            at = [name for name, _ in self.stages].index("forward")
            self.stages.insert(at, ("buffer_sync", "sync"))
            self.names.add("buffer_sync")
        try:
            try:
                self._client = _new_client(self.stages, layout, source, self._client_kwargs)
            except ValueError as e:
                if layout is None or "layout" not in str(e):
                    raise
                _warn(f"layout {_layout_text(layout)} refused ({e}); no layout declared")
                self.layout_note = f"no layout: {_layout_text(layout)} refused by the stub ({e})"
                self._client = _new_client(self.stages, None, "refused", self._client_kwargs)
        except Exception as e:  # never stop training for the stub
            _warn(f"not recording ({e}); training goes on uninstrumented")
            self._client = None
            self._restore_patches()
            return None
        client = self._client
        self.layout = getattr(client, "layout", layout)
        if self.comm_hook and client.enabled:
            try:
                self._probe = client.probe_ring()
                self._probe_lock = threading.Lock()
            except Exception as e:  # the probe is evidence: never stop training for it
                _warn(f"collective intervals not reported ({e})")
        if self._captures and client.enabled:
            from stagefrontier.torch.capture import TraceCapture

            self._capture = TraceCapture(client.rank, warn=_warn, job=client.job_id,
                                         answer=client.answer_capture,
                                         modules=self._live_models,
                                         busy=lambda: len(self._user_profilers) > 0)
            client.declare_capture_handler()
        if client.enabled:
            from stagefrontier.hang_dump import enable_hang_dumps

            self._hang_dumps = enable_hang_dumps(client, warn=_warn)
        return client

    def _first_use(self, note="no layout: no DDP process group seen before the first step"):
        """The client, created now (without a layout) if it still waits for a DDP."""
        if not self._pending or os.getpid() != self._pid:
            return self._client
        with self._lock:
            if self._pending:
                self._start_client(None, note, "no_ddp")
        return self._client

    @property
    def client(self):
        """The stub's client (None: not recording); created now if it waits for a DDP."""
        return self._first_use("no layout: the client was needed before any DDP was built")

    @client.setter
    def client(self, value):
        self._pending = False
        self._client = value

    @property
    def probe(self):
        self._first_use("no layout: the client was needed before any DDP was built")
        return self._probe

    @property
    def capture(self):
        self._first_use("no layout: the client was needed before any DDP was built")
        return self._capture

    @property
    def hang_dumps(self):
        self._first_use("no layout: the client was needed before any DDP was built")
        return self._hang_dumps

    def _on_ddp(self, ddp):
        """A DDP was built: its process group tells this rank's role, if the client waits."""
        try:
            group = _ddp_group_ranks(ddp)
        except Exception as e:
            group = None
            failure = f"cannot read the DDP process group ({e})"
        if not self._pending:
            # The layout is fixed: say once when a later DDP would have told another one.
            if not self._infer or group is None or self._ddp_group == group[0]:
                return
            first = self._ddp_group
            if first is None:
                self._ddp_group = group[0]
                if len(group[0]) < group[1] and not self._group_warned:
                    self._group_warned = True
                    _warn(f"rank {group[2]}: DDP over group {_ranks_text(group[0])} built after "
                          "the first step: no layout declared (set STAGEFRONTIER_LAYOUT)")
            elif not self._group_warned:
                self._group_warned = True
                _warn(f"rank {group[2]}: another DDP over group {_ranks_text(group[0])}, not "
                      f"{_ranks_text(first)}: the first one's layout stays")
            return
        if group is None:
            layout, note, source = None, f"no layout: {failure}", "not_inferred"
            _warn(f"could not infer the layout: {failure}")
        else:
            ranks, world, rank = group
            self._ddp_group = ranks
            layout, note = infer_layout(ranks, world, rank)
            source = ("inferred" if layout is not None else
                      "data_parallel_only" if len(set(ranks)) == world else "not_inferred")
            if layout is not None:
                _warn(f"rank {rank}: {note}")
            elif len(ranks) < world:  # a layout was meant, not found
                _warn(f"rank {rank}: {note}; declare it with STAGEFRONTIER_LAYOUT")
        if os.getpid() == self._pid:
            with self._lock:
                if self._pending:
                    self._start_client(layout, note, source)

    # ---- explicit API ----------------------------------------------------------------------
    def begin(self):
        """Starts a step if none is open (the hooks call it lazily)."""
        client = self._client
        if client is None:
            client = self._first_use()
        if client is not None and not self.in_step:
            self.bucket_launch_ns.clear()
            client.begin_step()
            self.in_step = True
            if self._capture is not None:
                wanted = client.should_capture_trace()
                window = client.capture_window if wanted else None
                self._capture.on_step_begin(client.current_step, wanted,
                                            request_first=window[0] if window else None)

    def end(self):
        """Ends the open step and publishes it."""
        if self._client is not None and self.in_step:
            if self._capture is not None:
                self._capture.on_step_end()
            self._client.end_step()
            self.in_step = False

    def step_boundary(self):
        self.end()
        self.begin()

    def annotating(self):
        """True when stages are also profiler ranges: --annotate, or a capture is running."""
        return self.annotate or (self._capture is not None and self._capture.active)

    def stage(self, name):
        """A context manager for stage `name` (a no-op when not recording)."""
        if self._client is None and self._first_use() is None:
            return contextlib.nullcontext()
        self.begin()
        if self.annotating():
            return _annotated(self._client.stage(name), name)
        return self._client.stage(name)

    def mark(self, name, t_ns=None):
        """Stage `name` ended now (or at t_ns, a time.monotonic_ns() value)."""
        if self._client is None and self._first_use() is None:
            return
        self.begin()
        if t_ns is None:
            self._client.mark(name)
        else:
            self._client.mark_at(name, t_ns)

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
        client = self._first_use()
        return client is not None and client.should_capture_trace()

    def stats(self):
        if self._client is None:  # not recording, or no step yet
            return {}
        out = dict(self._client.stats())
        if self._capture is not None:
            out.update(self._capture.summary())
        return out

    def close(self):
        """Writes a capture still running and gives the slot back (at exit).

        Python may never destroy the client at exit: without close() the next run of this
        local rank would find the slot held by a dead pid and warn that it took it over.
        """
        self._pending = False  # a client never created is not created at exit
        if self._capture is not None:
            self._capture.finish()
        if self._hang_dumps is not None:
            self._hang_dumps.close()
        if self._client is not None:
            self._client.close()

    def _live_models(self):
        """The models whose modules a capture names (DDP wrappers and the installed model)."""
        return [m for m in (ref() for ref in self._models) if m is not None]

    def _remember_model(self, model):
        self._models = [r for r in self._models if r() is not None]
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
        if self._client is None and not self._pending:  # not recording
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

        from torch.nn.parallel import DistributedDataParallel as DDP

        def make_forward(orig):
            def forward(module, *args, **kwargs):
                # Recomputed in backward (activation checkpointing): part of backward.
                if sf._backward_depth > 0:
                    return orig(module, *args, **kwargs)
                key = getattr(module, "_stagefrontier_key", None)
                if key is not None and torch.is_grad_enabled():  # no_grad: no backward awaits it
                    sf._forwarded.add(key)
                if sf._forward_depth > 0:  # inside another model's forward: part of it
                    return orig(module, *args, **kwargs)
                sf._forward_depth += 1
                try:
                    if "buffer_sync" in sf.names and sf._client is not None:
                        if isinstance(module, DDP):
                            return sf._forward_split(orig, module, args, kwargs)
                        sf.mark("buffer_sync")  # not a DDP: nothing waited for
                    with sf.stage("forward"):
                        return orig(module, *args, **kwargs)
                finally:
                    sf._forward_depth -= 1

            return forward

        self._patch(DDP, "forward", make_forward)
        if model is not None:
            self._remember_model(model)
            if isinstance(model, DDP):
                self._note_ddp(model)
            else:
                self._patch(type(model), "forward", make_forward)

        def make_run_forward(orig):
            def _run_ddp_forward(ddp, *args, **kwargs):
                if sf._buffer_sync_open:  # DDP's broadcasts are done: the module's work begins
                    sf._buffer_sync_open = False
                    sf.mark("buffer_sync")
                    sf._end_buffer_sync_range()
                    if sf.annotating():
                        with _profiler_range("forward"):
                            return orig(ddp, *args, **kwargs)
                return orig(ddp, *args, **kwargs)

            return _run_ddp_forward

        if hasattr(DDP, "_run_ddp_forward"):
            self._patch(DDP, "_run_ddp_forward", make_run_forward)

        def make_ddp_init(orig):
            def __init__(ddp, *args, **kwargs):
                orig(ddp, *args, **kwargs)
                sf._note_ddp(ddp)
                try:
                    sf._on_ddp(ddp)
                except Exception as e:  # never stop training for the layout
                    _warn(f"no layout inferred ({e})")
                    sf._first_use()
                if sf._client is None:  # not recording
                    return
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
                sf._grads_seen.clear()
                sf._forget_freed_ddps()
                # On an exception: whether the process group raised it. Not the exception
                # itself: kept in this frame, its traceback would hold the frame (and the
                # autograd graph) in a cycle.
                collective = None
                try:
                    if sf.annotating():  # a capture's trace needs the range too
                        with _profiler_range("backward"):
                            return orig(*args, **kwargs)
                    return orig(*args, **kwargs)
                except BaseException as e:
                    collective = stagefrontier.collective_failure(e)
                    raise
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
                    all_ready = sf._all_grads_ready()
                    if collective is None:
                        sf.mark("backward", local_end)
                        sf.mark("grad_sync", end)
                    elif launches or all_ready or collective:
                        # Raised in the wait (an all-reduce that failed: a peer gone): the
                        # open stage stays grad_sync, where a trainer ending on it was. A
                        # gradient hook that raises after some gradients were ready is
                        # local work: backward stays open.
                        sf.mark("backward", local_end)
                    sf._end_grad_counts(learn=collective is None)

            return backward

        self._patch(torch.Tensor, "backward", make_backward)
        self._patch(torch.autograd, "backward", make_backward)

        def make_step(step_orig):
            def step(o, *a, **k):
                # An optimizer that delegates to another (ZeroRedundancyOptimizer, a wrapper)
                # is one step: only the outermost call is the stage.
                if sf._optimizer_depth > 0:
                    return step_orig(o, *a, **k)
                sf._optimizer_depth += 1
                try:
                    # Not on an exception: the step stays open where it raised.
                    with sf.stage("optimizer"):
                        out = step_orig(o, *a, **k)
                finally:
                    sf._optimizer_depth -= 1
                sf.step_boundary()
                return out

            return step

        def patch_step(cls):
            if not getattr(cls.step, "_stagefrontier", False):
                sf._patch(cls, "step", make_step)

        def make_opt_init(orig):
            def __init__(opt, *args, **kwargs):
                orig(opt, *args, **kwargs)
                patch_step(type(opt))  # a class defined after install

            return __init__

        self._patch(torch.optim.Optimizer, "__init__", make_opt_init)
        self._patch_user_profilers(torch)
        # And the classes already defined, for an optimizer built before install.
        classes = list(torch.optim.Optimizer.__subclasses__())
        while classes:
            cls = classes.pop()
            classes.extend(cls.__subclasses__())
            if "step" in vars(cls):
                patch_step(cls)

        return self

    def _patch_user_profilers(self, torch):
        """The script's own profiler wins: two cannot run at once, and the second to start
        raises ("Profiler is already enabled") in whoever started it, the script's training
        loop included. A capture of ours ends (its trace written) before a profiler of the
        script's begins tracing, and none starts while one of the script's is started (a
        scheduled one still waiting included)."""
        import torch.autograd.profiler as autograd_profiler

        sf = self

        def make_prepare(orig):
            def _prepare_trace(p, *a, **k):
                cap = sf._capture
                if cap is not None and cap.active and not cap.starting:
                    cap.finish()
                return orig(p, *a, **k)

            return _prepare_trace

        def make_start(orig):
            def start(p, *a, **k):
                cap = sf._capture
                if cap is None or not cap.starting:
                    sf._user_profilers.add(p)
                return orig(p, *a, **k)

            return start

        def make_stop(orig):
            def stop(p, *a, **k):
                sf._user_profilers.discard(p)
                return orig(p, *a, **k)

            return stop

        try:
            self._patch(autograd_profiler.profile, "_prepare_trace", make_prepare)
            self._patch(torch.profiler.profile, "start", make_start)
            self._patch(torch.profiler.profile, "stop", make_stop)
        except Exception as e:  # a torch without these: captures may then meet the script's
            _warn(f"the script's own profiler is not watched ({e})")

    def _register_grad_ready_hooks(self, ddp):
        """A post-hook on each parameter's gradient accumulator, registered after DDP's own
        (which launches the buckets): the last to run marks the end of local backward work."""
        sf = self
        self._forget_freed_ddps()
        key = self._next_key
        self._next_key += 1

        def ready(*_):
            now = time.monotonic_ns()
            sf.grad_ready_ns = now
            sf._grads_seen[key] = sf._grads_seen.get(key, 0) + 1
            if sf._grads_seen[key] == sf._grads_expected(key) and sf._all_grads_ready():
                if sf._client is not None:
                    sf._client.show_open("grad_sync", now)

        try:
            accumulators, handles = [], []
            for p in ddp.module.parameters():
                if p.requires_grad:
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    handles.append(acc.register_hook(ready))
                    accumulators.append(acc)  # the hooks live as long as their nodes
            ddp._stagefrontier_accumulators = accumulators
            ddp._stagefrontier_key = key
            sf._grad_params[key] = len(accumulators)
            sf._grad_hooks[key] = handles
            # A DDP built again over the same parameters (one per epoch) shares their
            # accumulators: the freed one's hooks must go, or every gradient runs one more
            # hook per DDP ever built. Only noted here (the collector may run at any point of
            # a backward); _forget_freed_ddps removes them between backwards.
            weakref.finalize(ddp, sf._ddps_freed.append, key).atexit = False
        except Exception as e:
            _warn(f"cannot see when gradients are ready ({e}); backward then holds the "
                  "all-reduce wait and grad_sync is measured as zero")

    def _note_ddp(self, ddp):
        """Whether `ddp` broadcasts buffers in its forward (the schema's buffer_sync, when the
        client is still to be created). Needs DDP's _run_ddp_forward (torch >= 1.12) to tell
        where its own work before the module's forward ends."""
        try:
            if (getattr(ddp, "broadcast_buffers", False)
                    and hasattr(type(ddp), "_run_ddp_forward")
                    and next(iter(ddp.module.buffers()), None) is not None):
                self._buffer_sync = True
        except Exception:  # never stop training for the schema
            pass

    def _forward_split(self, orig, ddp, args, kwargs):
        """A DDP forward when the schema has buffer_sync: DDP's own work before the module's
        forward (the buffer broadcast, at its second step the bucket order's) is buffer_sync,
        shown open live, so that a rank waiting there at a hang reads as waiting; the module's
        forward is forward. An exception leaves open the stage it raised in."""
        self.begin()
        self._client.show_open("buffer_sync", time.monotonic_ns())
        self._buffer_sync_open = True
        try:
            if self.annotating():  # the profiler's ranges split where the stages do
                self._buffer_sync_range = _profiler_range("buffer_sync")
                self._buffer_sync_range.__enter__()
            out = orig(ddp, *args, **kwargs)
        except BaseException:
            self._buffer_sync_open = False
            self._end_buffer_sync_range()
            raise
        if self._buffer_sync_open:  # the module's forward did not run through DDP's path
            self._buffer_sync_open = False
            self.mark("buffer_sync")
            self._end_buffer_sync_range()
        self.mark("forward")
        return out

    def _end_buffer_sync_range(self):
        """Ends the profiler range "buffer_sync" of _forward_split, if open. It ends inside
        DDP's own "DistributedDataParallel.forward" range, which began after it: the trace's
        stage ranges then end where the stub's stages do."""
        r, self._buffer_sync_range = self._buffer_sync_range, None
        if r is not None:
            r.__exit__(None, None, None)

    def _grads_expected(self, key):
        """Gradients model `key` delivers in a backward: its parameters at first, then the
        most it delivered in its last 32 completed backwards. Fewer than its parameters when some
        go unused (find_unused_parameters: DDP marks those ready itself, no accumulator runs).
        The most, not the last, so that a backward of a varying graph never shows grad_sync
        before its local work is done (it then shows none, as without the hooks)."""
        most = self._grad_most.get(key)
        return most if most is not None else self._grad_params.get(key, 0)

    def _all_grads_ready(self):
        """Whether every DDP model in this backward (those whose forward ran since the last
        backward; all of them if none did) has delivered its gradients."""
        keys = [k for k in self._forwarded if k in self._grad_params] or list(self._grad_params)
        return bool(keys) and all(
            0 < self._grads_expected(k) <= self._grads_seen.get(k, 0) for k in keys)

    def _end_grad_counts(self, learn):
        """A backward ended; when it returned (learn), remember how many gradients each model
        in it delivered."""
        import collections

        for key in self._forwarded if learn else ():
            seen = self._grads_seen.get(key, 0)
            if seen > 0 and key in self._grad_params:
                counts = self._grad_counts.setdefault(key, collections.deque(maxlen=32))
                counts.append(seen)
                self._grad_most[key] = max(counts)
        self._forwarded.clear()

    def _forget_freed_ddps(self):
        """Removes the gradient hooks and counts of the DDP models freed since last time."""
        while self._ddps_freed:
            key = self._ddps_freed.pop()
            for handle in self._grad_hooks.pop(key, ()):
                handle.remove()
            for d in (self._grad_params, self._grad_counts, self._grad_most, self._grads_seen):
                d.pop(key, None)
            self._forwarded.discard(key)

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
        if self._probe is None:
            return -1
        with self._probe_lock:
            seq = self._probe_seq
            self._probe_seq += 1
            self._probe_pending[seq] = launch_ns
            return seq

    def _probe_completed(self, seq, launch_ns, nbytes, end_ns):
        """Reports one Gloo all-reduce (op 0): launched, started (a CPU collective starts at
        its launch) and completed, then advances the watermark past what is done."""
        if self._probe is None or seq < 0:
            return
        try:
            with self._probe_lock:
                self._probe_pending.pop(seq, None)
                self._probe.publish(op=0, nbytes=nbytes, call_ns=launch_ns, start_ns=launch_ns,
                                   end_ns=end_ns, seq=seq)
                through = min(self._probe_pending.values(), default=time.monotonic_ns())
                self._probe.resolved_through(through)
        except Exception as e:  # never let the probe break the all-reduce's future
            _warn(f"collective interval not reported ({e})")

    def _restore_patches(self):
        for owner, attr, original in reversed(self._patches):
            setattr(owner, attr, original)
        self._patches.clear()

    def uninstall(self):
        """Undoes install(): the patches, the gradient hooks, a running capture (written, its
        profiler and module hooks off), the hang dumps' handler; instrument() then makes a new
        instance."""
        global _ACTIVE
        if self._capture is not None:
            self._capture.finish()
        self._restore_patches()
        for key in list(self._grad_hooks):
            for handle in self._grad_hooks.pop(key):
                handle.remove()
        # The SIGUSR2 handler belongs to this instance's client: give it back too.
        if self._hang_dumps is not None:
            self._hang_dumps.close()
            self._hang_dumps = None
        if _ACTIVE is self:
            _ACTIVE = None


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
