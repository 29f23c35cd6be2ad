"""Module names in profiler captures: while a capture runs, each nn.Module call is a
torch.profiler range "nn.Module: <name> (<Class>)", so that a capture's report names the
module an operator ran in, not only its call path of operators.

torch 2.x's profiler records such ranges itself (with_modules); Debian's torch 1.13 does not
for eager models. These ranges come from PyTorch's global forward hooks, installed when a
capture starts and removed when it ends: outside captures they cost nothing.

    ranges = ModuleRanges(roots=lambda: [model])   # the models whose submodules to name
    ranges.start()    # as the profiler starts
    ...               # model(x): "nn.Module: Model", "nn.Module: net.2 (Linear)", ...
    ranges.stop()     # as it stops

<name> is the module's qualified name under its root (as `named_modules()` gives it, without
DDP's "module." prefix); a root is named by its class only, and a module that is under no root
(built after the capture started, or of another model) by its class only. DDP wrappers get no
range (their forward is already "DistributedDataParallel.forward"). Forward only: PyTorch's
global backward hooks rewrite the autograd graph of every module, too intrusive for a capture
that must not change training. A hook never raises into the model: a failure is warned once
and the module runs without a range.
"""
import threading

PREFIX = "nn.Module: "


class ModuleRanges:
    def __init__(self, roots, warn=None):
        """roots: a callable returning the models whose submodules are named (DDP or not)."""
        self._roots = roots
        self._warn = warn or (lambda msg: None)
        self._labels = {}      # id(module) -> label, or None for no range
        self._local = threading.local()
        self._handles = []
        self._warned = False

    @property
    def active(self):
        return bool(self._handles)

    def start(self):
        """Names the roots' modules and installs the hooks; False (warned) when it could not."""
        if self._handles:
            return True
        try:
            import torch.nn.modules.module as nn_module

            self._labels = self._label_map()
            self._handles = [nn_module.register_module_forward_pre_hook(self._enter),
                             nn_module.register_module_forward_hook(self._exit)]
            return True
        except Exception as e:  # names are a help to the report: never stop training for them
            self.stop()
            self._warn(f"capture: no module ranges ({e})")
            return False

    def stop(self):
        """Removes the hooks and closes the ranges this thread left open (a forward raised)."""
        for h in self._handles:
            try:
                h.remove()
            except Exception:
                pass
        self._handles = []
        stack = getattr(self._local, "stack", None)
        while stack:
            self._close(stack.pop()[1])

    def label(self, module):
        """The range name for `module`, or None when it gets none (a DDP wrapper)."""
        key = id(module)
        if key in self._labels:
            return self._labels[key]
        return PREFIX + type(module).__name__

    def _label_map(self):
        from torch.nn.parallel import DistributedDataParallel as DDP

        labels = {}
        for root in self._roots() or ():
            if isinstance(root, DDP):
                labels[id(root)] = None
                root = root.module
            for name, m in root.named_modules():
                if id(m) in labels:
                    continue
                cls = type(m).__name__
                labels[id(m)] = PREFIX + (f"{name} ({cls})" if name else cls)
        return labels

    def _enter(self, module, inputs):
        try:
            label = self.label(module)
            if label is None:
                return None
            from torch.autograd.profiler import record_function

            r = record_function(label)
            r.__enter__()
            stack = getattr(self._local, "stack", None)
            if stack is None:
                stack = self._local.stack = []
            stack.append((id(module), r))
        except Exception as e:
            self._failed(e)
        return None

    def _exit(self, module, inputs, output):
        try:
            stack = getattr(self._local, "stack", None)
            key = id(module)
            # Ranges of modules whose forward raised (no exit hook) close with their caller's.
            if stack and any(k == key for k, _ in stack):
                while True:
                    k, r = stack.pop()
                    self._close(r)
                    if k == key:
                        break
        except Exception as e:
            self._failed(e)
        return None

    @staticmethod
    def _close(r):
        try:
            r.__exit__(None, None, None)
        except Exception:
            pass

    def _failed(self, e):
        if not self._warned:
            self._warned = True
            self._warn(f"capture: a module range failed ({e}); the capture goes on")
