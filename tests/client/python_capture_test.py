"""stagefrontier.torch's profiler captures (capture.py), step by step as the instrumentation
drives them: the trace holds exactly the asked steps, a busy profiler or an unwritable
directory fails the capture with the reason and training goes on, a capture still running at
exit is written; each state is answered to the coordinator (running, done with the size,
failed with busy/start/write) for the request's first step; while a capture runs, each module's
forward is a range named after the module (module_ranges.py), and only then."""
import json
import os
import stat
import tempfile
import unittest

import torch

from stagefrontier.torch.capture import TraceCapture
from stagefrontier.torch.module_ranges import ModuleRanges


def work():
    a = torch.randn(16, 16)
    return (a @ a).sum()


def run(capture, steps, wanted):
    first = min(wanted) if wanted else None
    for step in steps:
        capture.on_step_begin(step, step in wanted,
                              request_first=first if step in wanted else None)
        work()
        capture.on_step_end()


def names(path, prefix):
    with open(path) as f:
        doc = json.load(f)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    return sorted(e["name"] for e in events if e.get("name", "").startswith(prefix))


def step_names(path):
    return names(path, "ProfilerStep#")


class Mixer(torch.nn.Module):
    def forward(self, x):
        return x @ x.t()


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        self.mixer = Mixer()

    def forward(self, x):
        return self.mixer(self.net(x))


class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("a forward that raises")


def global_hooks():
    import torch.nn.modules.module as m
    return len(m._global_forward_pre_hooks) + len(m._global_forward_hooks)


class CaptureTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.messages = []
        self.answers = []

    def capture(self, directory=None):
        return TraceCapture(3, directory or self.dir, warn=self.messages.append,
                            answer=lambda *a: self.answers.append(a))

    def test_the_asked_steps_and_no_other(self):
        c = self.capture()
        run(c, range(1, 9), {3, 4, 5})
        path = os.path.join(self.dir, "trace_rank3_step3.json")
        self.assertEqual(c.done, [(3, 5, path, os.path.getsize(path))])
        self.assertEqual(step_names(path), ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"])
        self.assertEqual([f for f in os.listdir(self.dir) if f.endswith(".part")], [])
        self.assertEqual(c.summary()["captures_done"], 1)
        self.assertIn("captured steps 3..5 of rank 3", self.messages[-1])
        self.assertEqual(self.answers, [(3, "running", "", 0),
                                        (3, "done", "", os.path.getsize(path))])
        # A second window later in the run is a second file.
        run(c, range(9, 14), {11, 12})
        self.assertEqual(len(c.done), 2)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "trace_rank3_step11.json")))

    # Regression (the stub must never hurt the trainer): a window of up to 10,000 steps was held
    # in the profiler, in the trainer's memory, until its end.
    def test_a_long_window_is_cut_at_max_steps(self):
        c = self.capture()
        c.max_steps = 3
        run(c, range(1, 12), set(range(2, 10)))
        path = os.path.join(self.dir, "trace_rank3_step2.json")
        self.assertEqual(c.done, [(2, 4, path, os.path.getsize(path))])
        self.assertEqual(step_names(path), ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"])
        self.assertTrue(any("cut at 3 steps" in m for m in self.messages), self.messages)
        self.assertEqual([a[1] for a in self.answers], ["running", "done"])
        # The next request is captured again.
        run(c, range(12, 16), {13, 14})
        self.assertEqual([d[:2] for d in c.done], [(2, 4), (13, 14)])

    def test_the_bound_comes_from_the_environment(self):
        os.environ["STAGEFRONTIER_CAPTURE_MAX_STEPS"] = "7"
        try:
            self.assertEqual(self.capture().max_steps, 7)
            os.environ["STAGEFRONTIER_CAPTURE_MAX_STEPS"] = "many"
            self.assertEqual(self.capture().max_steps, 200)
        finally:
            del os.environ["STAGEFRONTIER_CAPTURE_MAX_STEPS"]
        self.assertEqual(self.capture().max_steps, 200)

    def test_a_busy_profiler_fails_the_capture_once_and_training_goes_on(self):
        c = self.capture()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            run(c, range(1, 6), {2, 3, 4})
        self.assertEqual(len(c.failed), 1)
        self.assertEqual(c.failed[0][0], 2)
        self.assertIn("busy", c.failed[0][1])
        self.assertEqual(c.done, [])
        self.assertEqual(self.answers, [(2, "failed", "busy", 0)])
        # The next window is tried again, and works once the profiler is free.
        run(c, range(6, 10), {7, 8})
        self.assertEqual(len(c.done), 1)

    def test_an_unwritable_directory_fails_with_the_reason(self):
        locked = os.path.join(self.dir, "locked")
        os.makedirs(locked)
        os.chmod(locked, stat.S_IRUSR | stat.S_IXUSR)
        if os.access(locked, os.W_OK):  # root writes anywhere: use a file as the directory
            locked = os.path.join(self.dir, "a_file")
            open(locked, "w").close()
        c = self.capture(locked)
        run(c, range(1, 5), {1, 2})
        self.assertEqual(len(c.failed), 1)
        self.assertIn("the trace was not written", c.failed[0][1])
        self.assertEqual(self.answers[-1], (1, "failed", "write", 0))
        self.assertEqual(c.summary()["captures_failed"], 1)

    def test_a_capture_running_at_exit_is_written(self):
        c = self.capture()
        run(c, range(1, 4), {2, 3, 4, 5})
        self.assertTrue(c.active)
        c.finish()
        self.assertFalse(c.active)
        self.assertEqual(c.done[0][:2], (2, 3))

    def test_a_new_request_while_running_ends_the_old_capture_first(self):
        c = self.capture()
        for step, first in [(1, 1), (2, 1), (3, 3), (4, 3)]:
            c.on_step_begin(step, True, request_first=first)
            work()
            c.on_step_end()
        c.finish()
        self.assertEqual([d[:2] for d in c.done], [(1, 2), (3, 4)])
        self.assertEqual([(a[0], a[1]) for a in self.answers],
                         [(1, "running"), (1, "done"), (3, "running"), (3, "done")])

    def test_links_planted_in_the_capture_folder_are_never_followed(self):
        """Regression: the job's folder was created with makedirs and the trace written with
        open(path, 'w') and os.replace: a link another user planted at the folder, the
        temporary name or the trace's name made the trainer write or truncate its target."""
        victim = os.path.join(self.dir, "victim")
        with open(victim, "w") as f:
            f.write("keep me")
        # The folder itself a link: refused, nothing written through it.
        real = os.path.join(self.dir, "real")
        os.makedirs(real)
        folder_link = os.path.join(self.dir, "job")
        os.symlink(real, folder_link)
        c = self.capture(folder_link)
        run(c, range(1, 4), {1, 2})
        self.assertEqual(len(c.failed), 1)
        self.assertEqual(os.listdir(real), [])
        # Links at the temporary and the final names: replaced as names, never followed.
        folder = os.path.join(self.dir, "ok")
        os.makedirs(folder)
        name = "trace_rank3_step1.json"
        os.symlink(victim, os.path.join(folder, f"{name}.{os.getpid()}.part"))
        os.symlink(victim, os.path.join(folder, name))
        c = self.capture(folder)
        run(c, range(1, 4), {1, 2})
        self.assertEqual(len(c.done), 1, c.failed)
        with open(victim) as f:
            self.assertEqual(f.read(), "keep me")
        self.assertFalse(os.path.islink(os.path.join(folder, name)))
        self.assertEqual(step_names(os.path.join(folder, name)),
                         ["ProfilerStep#1", "ProfilerStep#2"])
        self.assertEqual(sorted(os.listdir(folder)), [name])  # no temporary left

    def test_a_failed_write_leaves_no_temporary_file(self):
        class Failing:
            def export_chrome_trace(self, path):
                with open(path, "w") as f:
                    f.write("half a trace")
                raise OSError(28, "No space left on device")

        c = self.capture()
        with self.assertRaises(OSError):
            c._write(Failing(), "trace_rank3_step9.json")
        self.assertEqual(os.listdir(self.dir), [])

    def test_a_request_replacing_a_failed_one_is_captured(self):
        """Regression: after a failure, a new request whose window followed straight on was
        neither captured nor answered (the coordinator waited for its answer for good)."""
        c = self.capture()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            c.on_step_begin(10, True, request_first=10)  # busy: request 10 fails
            c.on_step_end()
        for step in (11, 12, 13):  # request 11 replaces it, the profiler now free
            c.on_step_begin(step, True, request_first=11)
            work()
            c.on_step_end()
        c.finish()
        self.assertEqual([d[:2] for d in c.done], [(11, 13)])
        self.assertEqual([(a[0], a[1]) for a in self.answers],
                         [(10, "failed"), (11, "running"), (11, "done")])

    def test_a_child_forked_during_a_capture_runs_without_the_profiler(self):
        """Regression: a DataLoader worker forked while a capture ran inherited the profiler,
        on, and recorded its every operation for its whole life."""
        c = self.capture()
        c.on_step_begin(1, True, request_first=1)
        self.assertTrue(torch.autograd._profiler_enabled())
        pid = os.fork()
        if pid == 0:
            ok = not torch.autograd._profiler_enabled() and not c.active
            c.finish()  # the parent's to write: nothing here
            os._exit(0 if ok and not os.listdir(self.dir) else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        c.on_step_end()
        c.finish()
        self.assertEqual(len(c.done), 1)

    def test_an_answer_that_raises_is_only_warned(self):
        def broken(*_):
            raise RuntimeError("no stub")
        c = TraceCapture(3, self.dir, warn=self.messages.append, answer=broken)
        run(c, range(1, 4), {1, 2})
        self.assertEqual(len(c.done), 1)
        self.assertTrue(any("capture answer not given" in m for m in self.messages))

    def test_modules_are_named_ranges_while_a_capture_runs_and_only_then(self):
        model = Model()
        c = TraceCapture(3, self.dir, warn=self.messages.append, modules=lambda: [model])
        hooks_before = global_hooks()
        for step in range(1, 6):
            c.on_step_begin(step, step in (2, 3), request_first=2 if step in (2, 3) else None)
            self.assertEqual(global_hooks(), hooks_before + (2 if step in (2, 3) else 0))
            model(torch.randn(4, 8))
            c.on_step_end()
        self.assertEqual(global_hooks(), hooks_before)
        path = os.path.join(self.dir, "trace_rank3_step2.json")
        got = names(path, "nn.Module: ")
        # Two steps, each calling the model, its Sequential, Linear, ReLU and the mixer once.
        self.assertEqual(sorted(set(got)), ["nn.Module: Model", "nn.Module: mixer (Mixer)",
                                            "nn.Module: net (Sequential)",
                                            "nn.Module: net.0 (Linear)",
                                            "nn.Module: net.1 (ReLU)"])
        self.assertEqual(len(got), 10)

    def test_a_module_that_raises_leaves_no_range_open(self):
        model = Model()
        r = ModuleRanges(lambda: [model])
        self.assertTrue(r.start())
        outer = torch.nn.Sequential(Broken())
        with self.assertRaises(ValueError):
            outer(torch.randn(2, 8))
        self.assertEqual(len(r._local.stack), 2)  # Sequential and Broken never exited
        model(torch.randn(2, 8))  # nesting goes on from where it was
        self.assertEqual(len(r._local.stack), 2)
        r.stop()
        self.assertEqual(r._local.stack, [])
        self.assertFalse(r.active)
        self.assertEqual(r.label(model.mixer), "nn.Module: mixer (Mixer)")
        self.assertEqual(r.label(Broken()), "nn.Module: Broken")  # under no root

    def test_a_ddp_root_is_named_without_its_wrapper(self):
        from torch.nn.parallel import DistributedDataParallel as DDP

        class FakeDDP(DDP):  # no process group needed: only .module is read
            def __init__(self, module):
                torch.nn.Module.__init__(self)
                self.module = module

        model = Model()
        wrapper = FakeDDP(model)
        r = ModuleRanges(lambda: [wrapper])
        r._labels = r._label_map()
        self.assertIsNone(r.label(wrapper))
        self.assertEqual(r.label(model), "nn.Module: Model")
        self.assertEqual(r.label(model.net[0]), "nn.Module: net.0 (Linear)")


if __name__ == "__main__":
    unittest.main()
