"""The Python stub (import stagefrontier) under /usr/bin/python3, read back by the real reader."""
import faulthandler
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

import stagefrontier

CLI = os.environ["STAGEFRONTIER_CLI"]
STAGES = [("data", "io"), ("forward", "compute"), ("backward", "mixed"), ("optimizer", "compute")]


def segment(path, *args):
    out = subprocess.run([CLI, "segment", path, *args], check=True, capture_output=True, text=True)
    return out.stdout


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def client(self, **kw):
        args = dict(job_id="py", rank=1, local_rank=1, world_size=2, local_world_size=2,
                    shm_dir=self.dir, quiet=True)
        args.update(kw)
        return stagefrontier.Client(stages=STAGES, **args)

    def test_steps_reach_the_segment(self):
        c = self.client()
        self.assertTrue(c.enabled)
        self.assertEqual(c.schema, "data:io,forward:compute,backward:mixed,optimizer:compute")
        for _ in range(4):
            c.begin_step()
            with c.stage("data"):
                pass
            with c.stage("forward"):
                pass
            c.mark("backward")
            c.enter("optimizer")
            c.exit("optimizer")
            c.end_step()
        s = c.stats()
        self.assertEqual(s["steps_begun"], 4)
        self.assertEqual(s["steps_recorded"], 4)
        self.assertEqual(s["misuse"], 0)
        run = os.path.join(self.dir, "run.jsonl")
        info = json.loads(segment(os.path.join(self.dir, "stagefrontier.py.seg"), "--json",
                                  "--drain", run))
        self.assertEqual(info["drained"], 4)
        slot = [s for s in info["slots"] if s["local_rank"] == 1][0]
        self.assertEqual(slot["rank"], 1)
        self.assertEqual(slot["schema"][2], ["backward", "mixed"])
        with open(run) as f:
            records = [json.loads(line) for line in f]
        self.assertEqual([r["step"] for r in records], [0, 1, 2, 3])
        for r in records:
            b = r["boundaries_ns"]
            self.assertEqual(len(b), 5)
            self.assertEqual(b, sorted(b))

    def test_an_exception_inside_a_stage_still_ends_the_stage(self):
        c = self.client()
        c.begin_step(7)
        with self.assertRaises(RuntimeError):
            with c.stage("data"):
                raise RuntimeError("trainer error")
        c.end_step()
        self.assertEqual(c.stats()["misuse"], 0)
        self.assertEqual(c.current_step, 7)

    def test_an_uncaught_exception_is_told_to_the_slot(self):
        """A trainer that ends on an exception raised inside a stage: the slot says so
        (exit_reason, slot offset 1656) and still names the stage it raised in; the trainer's
        traceback and exit status are Python's own. A clean exit says nothing."""
        script = (
            "import stagefrontier, sys\n"
            "c = stagefrontier.Client(stages=%r, job_id='py', rank=1, local_rank=1,\n"
            "    world_size=2, local_world_size=2, shm_dir=sys.argv[1], quiet=True)\n"
            "c.begin_step(7)\n"
            "with c.stage('data'):\n"
            "    pass\n"
            "if sys.argv[2] == 'raise':\n"
            "    with c.stage('forward'):\n"
            "        raise RuntimeError('trainer error')\n"
            "if sys.argv[2] == 'peer':  # what torch 1.13's Gloo raises when a peer is gone\n"
            "    with c.stage('forward'):\n"
            "        raise RuntimeError('[../third_party/gloo/gloo/transport/tcp/pair.cc:598] '\n"
            "                           'Connection closed by peer [127.0.0.1]:60591')\n"
            "c.end_step()\n" % (STAGES,))
        seg = os.path.join(self.dir, "stagefrontier.py.seg")
        out = subprocess.run([sys.executable, "-c", script, self.dir, "raise"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("RuntimeError: trainer error", out.stderr)
        self.assertEqual(self.slot_field(None, 1656), 1)
        slot = [s for s in json.loads(segment(seg, "--json"))["slots"]
                if s["local_rank"] == 1][0]
        self.assertEqual(slot["state"], "released")
        self.assertEqual(slot["exit_reason"], "exception")
        self.assertEqual((slot["open"]["stage"], slot["open"]["step"]), ("forward", 7))
        self.assertIn("exit reason: exception", segment(seg))
        # The process group's error: the rank is a collective's victim (reason 2).
        out = subprocess.run([sys.executable, "-c", script, self.dir, "peer"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("Connection closed by peer", out.stderr)
        self.assertEqual(self.slot_field(None, 1656), 2)
        slot = [s for s in json.loads(segment(seg, "--json"))["slots"]
                if s["local_rank"] == 1][0]
        self.assertEqual(slot["exit_reason"], "collective_exception")
        self.assertEqual((slot["open"]["stage"], slot["open"]["step"]), ("forward", 7))
        self.assertIn("exit reason: collective_exception (its trainer ended on a collective's "
                      "error", segment(seg))
        # The next owner of the slot starts with nothing said; a clean exit says nothing.
        out = subprocess.run([sys.executable, "-c", script, self.dir, "clean"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(self.slot_field(None, 1656), 0)
        slot = [s for s in json.loads(segment(seg, "--json"))["slots"]
                if s["local_rank"] == 1][0]
        self.assertEqual(slot["exit_reason"], "")
        self.assertTrue(slot["open"]["between_steps"])

    def test_a_caught_exception_leaves_the_stage_open_until_the_next(self):
        c = self.client()
        c.begin_step(3)
        with self.assertRaises(RuntimeError):
            with c.stage("forward"):
                raise RuntimeError("caught")
        info = json.loads(segment(os.path.join(self.dir, "stagefrontier.py.seg"), "--json"))
        slot = [s for s in info["slots"] if s["local_rank"] == 1][0]
        self.assertEqual(slot["open"]["stage"], "forward")
        self.assertEqual(slot["exit_reason"], "")
        with c.stage("backward"):
            pass
        c.end_step()
        self.assertEqual(c.stats()["steps_recorded"], 1)
        c.note_uncaught_exception()
        self.assertEqual(self.slot_field(c, 1656), 1)
        c.close()

    def test_a_scope_kept_after_its_client_is_gone_is_safe(self):
        import gc
        c = self.client()
        scope = c.stage("data")
        c.begin_step()
        del c
        gc.collect()
        with scope:  # the scope shares ownership of the C++ client
            pass
        self.assertEqual(type(scope).__name__, "StageScope")
        # Regression: stagefrontier.StageScope() made a scope without a client, whose
        # __enter__ dereferenced null (a crash of the trainer).
        with self.assertRaises(TypeError):
            stagefrontier.StageScope()
        with self.assertRaises(TypeError):
            type(scope)()

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "unknown stage kind"):
            stagefrontier.Client(stages=[("a", "gpu")], shm_dir=self.dir, quiet=True)
        with self.assertRaisesRegex(ValueError, "a"):
            stagefrontier.Client(stages=[("a", "io"), ("a", "io")], shm_dir=self.dir, quiet=True)
        with self.assertRaisesRegex(ValueError, "not below world size"):
            self.client(rank=5)
        c = self.client()
        with self.assertRaises(KeyError):
            c.stage("nope")

    def slot_layout(self, local_rank=1):
        """The slot's rank layout: four u16 at slot offset 56 (segment-format.md)."""
        with open(os.path.join(self.dir, "stagefrontier.py.seg"), "rb") as f:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return struct.unpack_from("<4H", m, self.slot_offset(m, local_rank) + 56)

    def test_layout_reaches_the_segment(self):
        layout = {"pipeline_stage": 1, "pipeline_stages": 2, "tensor_rank": 0, "tensor_size": 1}
        c = self.client(world_size=4, layout=layout)
        self.assertTrue(c.enabled)
        self.assertEqual(c.layout, layout)
        self.assertEqual(self.slot_layout(), (1, 2, 0, 1))
        c.close()
        # Missing keys: pipeline_stage 0, pipeline_stages 1, tensor_rank 0, tensor_size 1.
        c = self.client(world_size=4, layout={"tensor_rank": 1, "tensor_size": 2})
        self.assertEqual(c.layout, {"pipeline_stage": 0, "pipeline_stages": 1,
                                    "tensor_rank": 1, "tensor_size": 2})
        self.assertEqual(self.slot_layout(), (0, 1, 1, 2))
        c.close()
        # None (the default) declares nothing, and clears the previous owner's layout.
        c = self.client(world_size=4)
        self.assertIsNone(c.layout)
        self.assertEqual(self.slot_layout(), (0, 0, 0, 0))
        c.close()

    def slot_layout_source(self, local_rank=1):
        """The slot's layout source: a u32 at slot offset 1652 (segment-format.md)."""
        with open(os.path.join(self.dir, "stagefrontier.py.seg"), "rb") as f:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return struct.unpack_from("<I", m, self.slot_offset(m, local_rank) + 1652)[0]

    def test_layout_source_reaches_the_segment(self):
        layout = {"pipeline_stages": 2}
        c = self.client(world_size=4, layout=layout, layout_source="inferred")
        self.assertEqual(c.layout_source, "inferred")
        self.assertEqual(self.slot_layout_source(), 4)
        c.close()
        c = self.client(world_size=4)  # nothing said, no layout: "none"
        self.assertEqual(c.layout_source, "none")
        self.assertEqual(self.slot_layout_source(), 2)
        c.close()
        c = self.client(world_size=4, layout=layout)  # nothing said, a layout: "declared"
        self.assertEqual(c.layout_source, "declared")
        c.close()
        c = self.client(world_size=4, layout_source="not_inferred")
        self.assertEqual(self.slot_layout_source(), 7)
        c.close()
        with self.assertRaisesRegex(ValueError, 'layout_source: unknown "guessed"'):
            self.client(layout_source="guessed")
        with self.assertRaisesRegex(ValueError, 'layout_source "inferred" needs a layout'):
            self.client(world_size=4, layout_source="inferred")
        with self.assertRaisesRegex(ValueError, 'layout_source "no_ddp" says none'):
            self.client(world_size=4, layout=layout, layout_source="no_ddp")

    def test_bad_layouts_raise(self):
        with self.assertRaisesRegex(ValueError, r"unknown key \"pipeline_rank\""):
            self.client(layout={"pipeline_rank": 0})
        with self.assertRaisesRegex(ValueError, "unknown key 3"):
            self.client(layout={3: 0})
        with self.assertRaisesRegex(TypeError, "tensor_size must be an int, not str"):
            self.client(layout={"tensor_size": "2"})
        with self.assertRaisesRegex(TypeError, "pipeline_stages must be an int, not bool"):
            self.client(layout={"pipeline_stages": True})
        with self.assertRaisesRegex(TypeError, "pipeline_stage must be an int, not float"):
            self.client(layout={"pipeline_stage": 1.0})
        with self.assertRaisesRegex(TypeError, "layout must be None or a dict"):
            self.client(layout=[0, 1, 0, 1])
        with self.assertRaisesRegex(ValueError, "pipeline_stages 1099511627776 is out of range"):
            self.client(layout={"pipeline_stages": 2 ** 40})
        with self.assertRaisesRegex(ValueError, r"pipeline_stage 2 is outside 0\.\.1"):
            self.client(layout={"pipeline_stage": 2, "pipeline_stages": 2})
        with self.assertRaisesRegex(ValueError, r"tensor_rank 2 is outside 0\.\.1"):
            self.client(layout={"tensor_rank": 2, "tensor_size": 2})
        with self.assertRaisesRegex(ValueError, "does not divide world size 2"):
            self.client(layout={"pipeline_stages": 4})

    def test_capture_answers(self):
        c = self.client()
        self.assertIsNone(c.capture_window)  # nothing asked
        c.declare_capture_handler()
        c.begin_step()
        c.answer_capture(0, "running")
        c.end_step()
        c.answer_capture(0, "done", bytes=1234)
        c.answer_capture(7, "failed", "busy")
        s = c.stats()
        self.assertEqual((s["captures_begun"], s["captures_done"], s["captures_failed"]),
                         (1, 1, 1))
        with self.assertRaisesRegex(ValueError, "unknown capture state \"finished\""):
            c.answer_capture(0, "finished")
        with self.assertRaisesRegex(ValueError, "unknown capture failure \"oops\""):
            c.answer_capture(0, "failed", "oops")

    def slot_offset(self, m, local_rank):
        # segment-format.md: the slot at slots_offset + local_rank * slot_bytes.
        slot_bytes, = struct.unpack_from("<Q", m, 40)
        slots_offset, = struct.unpack_from("<Q", m, 128)
        return slots_offset + local_rank * slot_bytes

    def request_dump(self, capture_id, local_rank=1):
        # The sidecar's part: the capture id into the slot's dump_request_id (+1688).
        with open(os.path.join(self.dir, "stagefrontier.py.seg"), "r+b") as f:
            with mmap.mmap(f.fileno(), 0) as m:
                struct.pack_into("<Q", m, self.slot_offset(m, local_rank) + 1688, capture_id)

    def slot_field(self, client, offset, local_rank=1):
        """A u32 of the slot header (1844: dump_signal)."""
        with open(os.path.join(self.dir, "stagefrontier.py.seg"), "rb") as f:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return struct.unpack_from("<I", m, self.slot_offset(m, local_rank) + offset)[0]

    def test_hang_dump_with_faulthandler(self):
        captures = os.path.join(self.dir, "captures")
        os.environ["STAGEFRONTIER_CAPTURE_DIR"] = captures
        try:
            c = self.client()
            fd = c.enable_hang_dumps(install_handler=False)
        finally:
            del os.environ["STAGEFRONTIER_CAPTURE_DIR"]
        self.assertGreaterEqual(fd, 0)
        with self.assertRaisesRegex(RuntimeError, "already"):
            c.enable_hang_dumps()
        self.assertEqual(self.slot_field(c, 1844), 0)  # not signalled before the handler is in
        faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True)
        c.publish_hang_dumps()
        self.assertEqual(self.slot_field(c, 1844), signal.SIGUSR2)
        try:
            self.request_dump(31)
            os.kill(os.getpid(), signal.SIGUSR2)
            # (capture id, count): a dump completed before the call is seen too.
            self.assertEqual(c.wait_hang_dump(5.0), (31, 1))
            self.assertEqual(c.wait_hang_dump(5.0, after=0), (31, 1))  # at once
            self.assertEqual(c.wait_hang_dump(0.05, after=1), (0, 1))  # timed out
        finally:
            # The slot stops naming the signal before the default action is back.
            c.unpublish_hang_dumps()
            self.assertEqual(self.slot_field(c, 1844), 0)
            faulthandler.unregister(signal.SIGUSR2)
        path = os.path.join(captures, "py", "stacks_rank1_capture31.txt")
        with open(path) as f:
            text = f.read()
        self.assertIn("# capture id: 31\n", text)
        self.assertIn("test_hang_dump_with_faulthandler", text)
        self.assertEqual(os.listdir(os.path.dirname(path)), ["stacks_rank1_capture31.txt"])
        self.assertEqual(c.stats()["dumps_written"], 1)
        self.assertEqual(c.stats()["dump_errors"], 0)
        um = os.umask(0)
        os.umask(um)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o666 & ~um)  # as capture.py's files
        faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True)
        c.publish_hang_dumps()  # again, after unpublish
        self.assertEqual(self.slot_field(c, 1844), signal.SIGUSR2)
        c.unpublish_hang_dumps()
        faulthandler.unregister(signal.SIGUSR2)
        c.close()
        self.assertEqual(self.slot_field(c, 1844), 0)
        c.unpublish_hang_dumps()  # closed: a no-op
        self.assertEqual(c.wait_hang_dump(5.0, 1), (0, 1))  # closed: at once

    def test_hang_dump_errors(self):
        c = self.client()
        with self.assertRaisesRegex(RuntimeError, "SIGUSR1"):
            c.enable_hang_dumps(signal=9)
        s = c.stats()
        self.assertEqual((s["dumps_written"], s["dumps_unrequested"], s["dump_errors"]), (0, 0, 0))
        self.assertEqual(c.wait_hang_dump(0.01), (0, 0))  # not enabled
        with self.assertRaisesRegex(RuntimeError, "not enabled"):
            c.unpublish_hang_dumps()
        with self.assertRaisesRegex(RuntimeError, "not enabled"):
            c.publish_hang_dumps()

    def test_hang_dumps_refused_over_a_handler_installed_from_c(self):
        # faulthandler's handler is installed from C: signal.getsignal does not see it, the
        # stub's check does (the script registered faulthandler for SIGUSR2 itself).
        c = self.client()
        faulthandler.register(signal.SIGUSR2, all_threads=True)
        try:
            with self.assertRaisesRegex(RuntimeError, "SIGUSR2 already has a handler"):
                c.enable_hang_dumps(install_handler=False)
        finally:
            faulthandler.unregister(signal.SIGUSR2)
        self.assertEqual(self.slot_field(c, 1844), 0)
        # Another library's handler from C: here the stub's own, through a second client.
        first = self.client(rank=0, local_rank=0)
        first.enable_hang_dumps()
        try:
            with self.assertRaisesRegex(RuntimeError, "SIGUSR2 already has a handler"):
                c.enable_hang_dumps(install_handler=False)
            with self.assertRaisesRegex(RuntimeError, "SIGUSR2 already has a handler"):
                c.enable_hang_dumps()
        finally:
            first.close()
        self.assertEqual(signal.getsignal(signal.SIGUSR2), signal.SIG_DFL)
        fd = c.enable_hang_dumps(install_handler=False)  # the default action: accepted
        self.assertGreaterEqual(fd, 0)
        c.close()

    def test_enable_hang_dumps_for_the_python_api(self):
        from stagefrontier.hang_dump import enable_hang_dumps

        captures = os.path.join(self.dir, "captures_api")
        c = self.client()
        warnings = []
        dumps = enable_hang_dumps(c, warn=warnings.append, directory=os.path.join(captures, "py"))
        self.assertIsNotNone(dumps, warnings)
        self.assertEqual(self.slot_field(c, 1844), signal.SIGUSR2)
        # The stub's directory is the environment's; point the request at a known place.
        self.request_dump(41)
        try:
            os.kill(os.getpid(), signal.SIGUSR2)
            self.assertEqual(c.wait_hang_dump(5.0, 0)[0], 41)
        finally:
            dumps.close()
        # The slot stopped naming the signal before faulthandler gave SIGUSR2 its default
        # action back: the sidecar never sends a signal that would end the process.
        self.assertEqual(self.slot_field(c, 1844), 0)
        self.assertIsNone(dumps.client)  # nothing keeps the client alive past its user
        c.close()
        self.assertEqual(warnings, [])  # no torch, no NCCL: nothing to say about the recorder
        # Regression: a handler the script installed after the dumps were enabled (SLURM's
        # --signal=USR2 preemption, say) was replaced by the default action at close, and the
        # script's next SIGUSR2 ended the process.
        c3 = self.client()
        dumps = enable_hang_dumps(c3, warn=warnings.append, directory=os.path.join(captures, "p3"))
        self.assertIsNotNone(dumps, warnings)
        got = []
        signal.signal(signal.SIGUSR2, lambda *_: got.append(1))
        try:
            dumps.close()
            os.kill(os.getpid(), signal.SIGUSR2)  # the script's handler, not the default
            self.assertEqual(got, [1])
        finally:
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)
            faulthandler.unregister(signal.SIGUSR2)  # its stale registration, for later tests
            c3.close()
        # A handler the script installed first is kept.
        c2 = self.client()
        signal.signal(signal.SIGUSR2, lambda *_: None)
        try:
            self.assertIsNone(enable_hang_dumps(c2, warn=warnings.append))
            self.assertIn("SIGUSR2 has a handler already", warnings[-1])
            self.assertEqual(self.slot_field(c2, 1844), 0)
        finally:
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)

    def test_evidence_files_are_never_written_through_a_link(self):
        """Regression: the Flight Recorder dump was written through its folder's path: a link
        planted there redirected it into another folder."""
        from stagefrontier.evidence_file import write_all, write_in_own_folder

        def write_in_folder(directory, name, text):  # as dump_flight_recorder writes
            return write_in_own_folder(directory, name, lambda fd: write_all(fd, text))

        mine = os.path.join(self.dir, "fr_mine")
        os.makedirs(mine)
        self.assertEqual(write_in_folder(mine, "flightrec_rank0_capture1.json", "{}"), 2)
        self.assertEqual(os.listdir(mine), ["flightrec_rank0_capture1.json"])
        elsewhere = os.path.join(self.dir, "fr_elsewhere")
        os.makedirs(elsewhere)
        link = os.path.join(self.dir, "fr_link")
        os.symlink(elsewhere, link)
        with self.assertRaises(OSError):
            write_in_folder(link, "flightrec_rank0_capture2.json", "{}")
        self.assertEqual(os.listdir(elsewhere), [])

    def test_no_segment_means_a_counting_no_op(self):
        c = self.client(shm_dir=os.path.join(self.dir, "missing"))
        self.assertFalse(c.enabled)
        self.assertIn("missing", c.disabled_reason)
        c.begin_step()
        with c.stage("data"):
            pass
        c.end_step()
        self.assertEqual(c.stats()["steps_not_recorded"], 1)

    def test_identity_from_the_environment(self):
        env = dict(os.environ, RANK="3", LOCAL_RANK="0", WORLD_SIZE="4", LOCAL_WORLD_SIZE="1",
                   TORCHELASTIC_RUN_ID="elastic-1", STAGEFRONTIER_SHM_DIR=self.dir,
                   STAGEFRONTIER_QUIET="1")
        code = ("import stagefrontier; c = stagefrontier.Client(stages=[('a','io')]); "
                "print(c.rank, c.local_rank, c.job_id, c.enabled)")
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(out.strip(), "3 0 elastic-1 True")


if __name__ == "__main__":
    unittest.main(verbosity=2)
