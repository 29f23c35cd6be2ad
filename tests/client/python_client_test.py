"""The Python stub (import stagefrontier) under /usr/bin/python3, read back by the real reader."""
import json
import os
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
