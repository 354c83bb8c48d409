#!/usr/bin/env python3
"""Hostile conditions for the Python client (clients/python), issue 25, with
the real trainwatch binary where the server is involved:

- spool files and their dir are fsynced;
- a full disk during an outage (os.write failing with ENOSPC) never raises
  inside log(), alert(), log_line() or finish(): drops are counted, one
  warning is printed, and spooling resumes once the disk has room;
- captured log lines are spooled while the server is unreachable and
  replayed exactly once (also when a push was stored but its answer lost);
- NaN and infinities in config and summary (also in a spool an older
  client left with bare NaN tokens) arrive as "NaN", "Inf", "-Inf";
- two processes with the same run id and rank never share a spool dir, and
  every point of both arrives;
- torchrun launches without a rendezvous id get distinct run ids, while the
  ranks of one launch agree;
- a run alert whose answer was lost is retried and stored (and routed) once.

Usage: python_client_faults_test.py /path/to/trainwatch [unittest args]
"""
import errno
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.parse
from unittest import mock

import twtest
from twtest import Server

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENT = os.path.join(ROOT, "clients", "python")
sys.path.insert(0, CLIENT)

import trainwatch  # noqa: E402
from trainwatch import _sender  # noqa: E402
from trainwatch._http import Unreachable  # noqa: E402


JOB_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
            "COBALT_JOBID", "JOB_ID", "SGE_ROOT", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "TRAINWATCH_RUN_ID")


def wait_for(cond, what, timeout=60):
    """Polls cond() until true; the timeout only bounds a hang, it is not a speed assumption."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class FaultsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-pyclient-faults-")
        self.data = os.path.join(self.tmp, "data")
        self.spool = os.path.join(self.tmp, "spool")
        self.server = None
        self.runs = []

    def tearDown(self):
        for r in self.runs:
            if not r._finished:
                r.finish(timeout=0)
        if self.server:
            self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers ------------------------------------------------------------
    def start(self, *extra, port=None):
        self.server = Server(self.data, extra_args=list(extra), port=port).start()
        return self.server

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.port

    def dead_url(self):
        return "http://127.0.0.1:%d" % twtest.free_port()  # nothing listens there

    def init(self, **kw):
        kw.setdefault("url", self.url if self.server else self.dead_url())
        kw.setdefault("spool_dir", self.spool)
        kw.setdefault("capture_output", False)
        kw.setdefault("install_hooks", False)
        kw.setdefault("flush_interval", 0.05)
        kw.setdefault("timeout", 2)
        run = trainwatch.init(**kw)
        self.runs.append(run)
        return run

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body[:500])
        return json.loads(body)["data"]

    def logs_endpoint(self):
        st, _ = self.server.request("GET", "/api/v1/logs/query?query=" + urllib.parse.quote('{project="none"}'))
        return st == 200

    def log_lines(self, run_name):
        q = urllib.parse.quote('{run="%s"}' % run_name)
        return [l["message"] for l in self.get("/api/v1/logs/query?limit=5000&query=" + q)["lines"]]

    def sync(self):
        out = subprocess.run([sys.executable, "-m", "trainwatch", "sync", "--spool", self.spool],
                             env=dict(os.environ, PYTHONPATH=CLIENT), capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return out.stdout.decode()

    def op_files(self, d):
        return sorted(n for n in os.listdir(d) if n.startswith("op-") and n.endswith(".json"))

    def spooled_ops(self, d):
        out = []
        for n in self.op_files(d):
            with open(os.path.join(d, n)) as f:
                out.append(json.load(f))
        return out

    # ---- 1. fsync ------------------------------------------------------------
    def test_spool_files_and_their_dir_are_fsynced(self):
        synced = []  # (is a dir, inode) of every fsync
        real_fsync = os.fsync

        def fsync(fd):
            st = os.fstat(fd)
            synced.append((stat.S_ISDIR(st.st_mode), st.st_ino))
            return real_fsync(fd)

        with mock.patch.object(_sender.os, "fsync", fsync):
            run = self.init(project="fsync", name="fsync", max_queue_points=100)
            for step in range(250):  # spills from log() itself past 100 queued points
                run.log({"loss": 1.0 / (step + 1)}, step=step)
            run.alert("spooled", "while the server is down")
            run.log_line("a line while down")
            run.finish(timeout=0)
        files = self.op_files(run.spool_dir)
        self.assertGreaterEqual(len(files), 4, files)  # batches, the alert, the finish (and the log line)
        file_inodes = {ino for is_dir, ino in synced if not is_dir}
        dir_inodes = {ino for is_dir, ino in synced if is_dir}
        for n in files + ["meta.json"]:  # a rename keeps the inode fsynced under the temporary name
            self.assertIn(os.stat(os.path.join(run.spool_dir, n)).st_ino, file_inodes, n)
        self.assertIn(os.stat(run.spool_dir).st_ino, dir_inodes)
        self.assertEqual([n for n in os.listdir(run.spool_dir) if n.endswith(".tmp")], [])
        ops = self.spooled_ops(run.spool_dir)
        points = sum(len(op["body"].get("points", ())) for op in ops if op["path"].endswith("/batches"))
        self.assertEqual(points, 250)
        self.assertTrue(any(op["path"].startswith("/api/v1/logs?") for op in ops), [op["path"] for op in ops])

    # ---- 2. full disk --------------------------------------------------------
    def test_full_disk_during_an_outage_never_raises_counts_and_warns_once(self):
        def enospc(fd, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        err = io.StringIO()
        t0 = time.monotonic()
        with mock.patch.object(sys, "__stderr__", err):
            with mock.patch.object(_sender.os, "write", enospc):
                run = self.init(project="full", name="full", max_queue_points=100)
                for step in range(3000):
                    run.log({"loss": 1.0, "acc": 0.5}, step=step)  # never raises, though every spill fails
                run.summary["best"] = 1.0
                run.alert("disk", "full")
                run.log_line("a line nobody can keep")
                wait_for(lambda: run.points_dropped == 3000 and run.logs_dropped >= 1 and run._sender.dropped >= 1,
                         "every spool write to fail and be counted")
                self.assertEqual(run.points_dropped, 3000)
                self.assertGreater(run._sender.spool_failures, 10)
                self.assertEqual(run.spooled, 0)
            # The disk has room again: the next points are spooled, fsynced and kept.
            for step in range(3000, 3500):
                run.log({"loss": 2.0}, step=step)
            run.finish(timeout=0)
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(run._sender.dropped, 1)  # the alert
        warnings = [l for l in err.getvalue().splitlines() if "dropped so far" in l]
        # At most one warning a minute, however many writes failed.
        self.assertGreaterEqual(len(warnings), 1, err.getvalue())
        self.assertLessEqual(len(warnings), 1 + int(elapsed // _sender.SPOOL_WARN_EVERY), err.getvalue())
        self.assertEqual([n for n in os.listdir(run.spool_dir) if n.endswith(".tmp")], [])
        steps = sorted(p["step"] for op in self.spooled_ops(run.spool_dir) if op["path"].endswith("/batches")
                       for p in op["body"]["points"])
        self.assertEqual(steps, list(range(3000, 3500)))
        self.assertTrue(any(op["path"].endswith("/finish") for op in self.spooled_ops(run.spool_dir)))

    def test_full_disk_when_the_spool_dir_is_set_up(self):
        err = io.StringIO()
        with mock.patch.object(sys, "__stderr__", err), \
                mock.patch.object(_sender.os, "makedirs", side_effect=OSError(errno.ENOSPC, "No space left")):
            run = self.init(project="full", name="nodir")  # no raise
            run.log({"loss": 1.0}, step=0)
            run.finish(timeout=0)
        self.assertEqual(run.points_dropped, 1)
        self.assertIn("cannot set up the spool dir", err.getvalue())

    # ---- 3. log lines ----------------------------------------------------------
    def test_log_lines_spooled_during_an_outage_and_replayed_once(self):
        port = twtest.free_port()
        self.start(port=port)
        if not self.logs_endpoint():
            self.skipTest("logs endpoint absent")
        run = self.init(project="logs", name="logs", finish_timeout=1)
        run.log_line("before")
        run.log({"loss": 1.0}, step=0)
        wait_for(lambda: run._sender.sent_batches >= 1 and not run._sender.lines, "the first send")
        self.server.kill9()
        for i in range(300):
            run.log_line("during-%d" % i)
        run.log({"loss": 2.0}, step=1)
        run.finish()  # the server is down: lines and points stay spooled
        self.assertGreater(run.spooled, 0)
        self.assertTrue(any(op["path"].startswith("/api/v1/logs?") for op in self.spooled_ops(run.spool_dir)))
        self.server.start()
        self.sync()
        lines = self.log_lines("logs")
        self.assertEqual(sorted(lines), sorted(["before"] + ["during-%d" % i for i in range(300)]))
        self.assertEqual(os.listdir(self.spool), [])

    def test_log_push_whose_answer_was_lost_is_stored_once(self):
        self.start()
        if not self.logs_endpoint():
            self.skipTest("logs endpoint absent")
        body = {"id": "lost1", "project": "lost", "rank": 0, "host": "h", "pid": os.getpid(), "world_size": 1,
                "name": "lost"}
        s = _sender.Sender(self.url, "lost1", 0, "h", os.path.join(self.spool, "lost1.r0"), body)
        self.assertTrue(s.register_now())
        real = s.http.request
        posts = []

        def request(method, path, body=None, **kw):
            out = real(method, path, body, **kw)
            posts.append(path.split("?")[0])
            if len(posts) == 1:
                raise Unreachable("timed out")  # stored, but the answer never came
            return out

        s.http.request = request
        s.add_line(time.time(), "info", "lost-answer", "stdout")
        s._cycle()  # sent, stored, "unreachable": to the spool under its batch id
        self.assertEqual(s.spooled, 1)
        s._next_retry = 0
        s._cycle()  # replayed: the server recognizes the batch id
        self.assertEqual(s.spooled, 0)
        self.assertEqual(posts, ["/api/v1/logs", "/api/v1/logs"])
        self.assertEqual(self.log_lines("lost"), ["lost-answer"])
        s.http.close()
        s.remove_spool_dir()

    # ---- 4. NaN / Inf ------------------------------------------------------------
    def test_nan_and_inf_in_config_and_summary(self):
        self.start()
        nan, inf = float("nan"), float("inf")
        run = self.init(project="nan", name="nan", config={"lr": nan, "clip": inf, "sub": {"floor": -inf, "l": [1.5, nan]}})
        run.log({"loss": 1.0}, step=0)
        run.summary["best"] = nan
        run.summary["worst"] = inf
        run.finish()
        self.assertEqual(run.spooled, 0)
        info = self.get("/api/v1/runs/" + run.id)
        self.assertEqual(info["config"], {"lr": "NaN", "clip": "Inf", "sub": {"floor": "-Inf", "l": [1.5, "NaN"]}})
        self.assertEqual((info["summary"]["best"], info["summary"]["worst"]), ("NaN", "Inf"))
        self.assertEqual(info["status"], "finished")

    def test_spool_with_bare_nan_tokens_is_replayed_not_stuck(self):
        # What an older client left: json.dump's bare NaN / Infinity, which a strict server refuses.
        self.start()
        d = os.path.join(self.spool, "oldnan.r0")
        os.makedirs(d)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"url": self.url, "run_id": "oldnan", "rank": 0,
                       "register": {"id": "oldnan", "project": "nan", "name": "oldnan", "rank": 0,
                                    "config": {"lr": float("nan")}}}, f)
        with open(os.path.join(d, "op-%016d.json" % 0), "w") as f:
            json.dump({"path": "/api/v1/runs/oldnan/batches",
                       "body": {"batch_id": "oldnan.0.x.0", "rank": 0, "host": "h",
                                "points": [{"step": 0, "ts": int(time.time() * 1000), "values": {"loss": 1.0}}],
                                "summary": {"peak": float("inf")}}}, f)
        with open(os.path.join(d, "op-%016d.json" % 1), "w") as f:
            json.dump({"path": "/api/v1/runs/oldnan/finish",
                       "body": {"status": "finished", "summary": {"last": float("-inf"), "x": float("nan")}}}, f)
        self.sync()
        info = self.get("/api/v1/runs/oldnan")
        self.assertEqual(info["status"], "finished")
        self.assertEqual(info["config"], {"lr": "NaN"})
        self.assertEqual((info["summary"]["peak"], info["summary"]["last"], info["summary"]["x"]), ("Inf", "-Inf", "NaN"))
        self.assertEqual(os.listdir(self.spool), [])

    # ---- 5. one spool per process ---------------------------------------------------
    def test_two_processes_with_one_run_id_and_rank_never_share_a_spool(self):
        port = twtest.free_port()  # the server is down while both run
        script = os.path.join(self.tmp, "proc.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""
                import sys
                sys.path.insert(0, %r)
                import trainwatch
                key = sys.argv[1]
                run = trainwatch.init(project="share", name="share", capture_output=False, timeout=1,
                                      finish_timeout=0.5, max_queue_points=50)
                print(run.spool_dir, flush=True)
                sys.stdin.readline()  # both processes are alive from here on
                for step in range(400):
                    run.log({key: step}, step=step)
                run.alert("from " + key)
                run.finish()
                print("spooled", run.spooled, flush=True)
            """ % CLIENT))
        env = dict(os.environ, TRAINWATCH_URL="http://127.0.0.1:%d" % port, TRAINWATCH_SPOOL=self.spool,
                   TRAINWATCH_RUN_ID="shared")
        procs = [subprocess.Popen([sys.executable, script, key], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for key in ("a_val", "b_val")]
        try:
            dirs = [p.stdout.readline().decode().strip() for p in procs]
            for p in procs:
                p.stdin.write(b"go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        self.assertNotEqual(dirs[0], dirs[1])
        self.assertIn(os.path.join(self.spool, "shared.r0"), dirs)
        for d in dirs:
            self.assertTrue(self.op_files(d), d)
        self.start(port=port)
        out = self.sync()
        self.assertNotIn("NOT sent", out)
        for key in ("a_val", "b_val"):  # every step of both, by step
            m = self.get("/api/v1/runs/metrics?x=step&points=100000&ids=shared&keys=" + key)
            self.assertEqual(len(m), 1, m)
            self.assertEqual([(p["x"], p["last"], p["count"]) for p in m[0]["points"]],
                             [(s, s, 1) for s in range(400)])
        alerts = sorted(a["title"] for a in self.get("/api/v1/runs/shared").get("alerts", []))
        self.assertEqual(alerts, ["from a_val", "from b_val"])
        self.assertEqual(os.listdir(self.spool), [])

    def test_sync_skips_a_spool_dir_a_live_process_holds(self):
        if _sender.fcntl is None:
            self.skipTest("no flock on this platform")
        run = self.init(project="held", name="held", id="held")
        run.log({"loss": 1.0}, step=0)
        run._sender.spill()
        self.assertTrue(self.op_files(run.spool_dir))
        self.start()
        out = self.sync()
        self.assertIn("in use by a running process; skipped", out)
        self.assertTrue(self.op_files(run.spool_dir))  # untouched

    # ---- 6. torchrun run ids ------------------------------------------------------
    def launch(self, env, ranks=2):
        """An "agent" process that starts `ranks` workers (as torchrun does) and
        prints the run id each computes; returns them."""
        agent = textwrap.dedent("""
            import os, subprocess, sys
            worker = "import sys; sys.path.insert(0, %r); from trainwatch.run import _distributed_id; print(_distributed_id('p', None))"
            ids = []
            for r in range(int(sys.argv[1])):
                e = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r))
                p = subprocess.run([sys.executable, "-c", worker], env=e, capture_output=True, check=True)
                ids.append(p.stdout.decode().strip())
                sys.stderr.write(p.stderr.decode())
            print(" ".join(ids))
        """ % CLIENT)
        base = {k: v for k, v in os.environ.items() if k not in JOB_VARS}
        base.update(env)
        out = subprocess.run([sys.executable, "-c", agent, str(ranks)], env=base, capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.decode().split(), out.stderr.decode()

    def test_torchrun_without_rendezvous_id_gets_distinct_run_ids(self):
        torchrun = {"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
                    "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
        first, _ = self.launch(torchrun)
        second, _ = self.launch(torchrun)
        self.assertEqual(len(set(first)), 1, first)    # the ranks of one launch agree
        self.assertEqual(len(set(second)), 1, second)
        self.assertNotEqual(first[0], second[0])        # two launches do not
        # A launcher pid the kernel reused names another process (start time).
        from trainwatch import run as run_mod
        with mock.patch.dict(os.environ, torchrun), mock.patch.object(run_mod.os, "getppid", return_value=4242):
            for k in JOB_VARS:
                if k not in torchrun:
                    os.environ.pop(k, None)
            with mock.patch.object(run_mod, "_process_start", return_value="boot/100"):
                a = run_mod._distributed_id("p", None)
            with mock.patch.object(run_mod, "_process_start", return_value="boot/900"):
                b = run_mod._distributed_id("p", None)
        self.assertNotEqual(a, b)
        # Multi-node: the scheduler's job id, the same on every node ("agent").
        nodes = dict(torchrun, LOCAL_WORLD_SIZE="1", SLURM_JOB_ID="101")
        n1, _ = self.launch(nodes, ranks=1)
        n2, _ = self.launch(nodes, ranks=1)
        other, _ = self.launch(dict(nodes, SLURM_JOB_ID="102"), ranks=1)
        self.assertEqual(n1, n2)
        self.assertNotEqual(n1, other)
        # A rendezvous id: every launch with it (a restart) is the same run.
        r1, _ = self.launch(dict(torchrun, TORCHELASTIC_RUN_ID="job-7"))
        r2, _ = self.launch(dict(torchrun, TORCHELASTIC_RUN_ID="job-7"))
        self.assertEqual(set(r1), set(r2))
        self.assertEqual(len(set(r1)), 1)
        # Multi-node with nothing job-unique: the same id, and a warning saying so.
        m1, err = self.launch(dict(torchrun, LOCAL_WORLD_SIZE="1"), ranks=1)
        self.assertIn("TRAINWATCH_RUN_ID", err)

    # ---- 7. alerts -------------------------------------------------------------------
    def test_retried_alert_is_stored_once(self):
        self.start()
        run = self.init(project="alerts", name="alerts")
        real = run._sender.http.request
        posts = []

        def request(method, path, body=None, **kw):
            out = real(method, path, body, **kw)
            if path.endswith("/alerts"):
                posts.append(body["alert_id"])
                if len(posts) == 1:
                    raise Unreachable("timed out")  # stored, but the answer never came
            return out

        run._sender.http.request = request
        run.alert("loss spike", "x", "warning")
        run.alert("second", "", "info")
        run.finish()
        self.assertEqual(run.spooled, 0)
        self.assertEqual(len(posts), 3, posts)
        self.assertEqual(posts[0], posts[1])  # the retry carries the same id
        self.assertNotEqual(posts[1], posts[2])
        info = self.get("/api/v1/runs/" + run.id)
        self.assertEqual([(a["title"], a["level"]) for a in info.get("alerts", [])],
                         [("loss spike", "warning"), ("second", "info")])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python_client_faults_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
