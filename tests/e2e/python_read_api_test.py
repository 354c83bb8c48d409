#!/usr/bin/env python3
"""End-to-end test of the Python client's read API (trainwatch.Api,
clients/python/trainwatch/api.py) against the real trainwatch binary:
runs logged with the real client (a two-rank run, two plain ones) are read
back with Api: runs() by a filter on config, a dict filter, by project
(quoted), sorted; run() with its alerts; history() rows equal to what was
logged (every step, values, NaN and infinities, absent keys), one row per
rank and step for the ranked run, x="time" order, start/end, keys; errors
of the server raised with its message; the pandas shape where pandas is
importable (skipped otherwise).

Usage: python_read_api_test.py /path/to/trainwatch [unittest args]
"""
import math
import os
import shutil
import sys
import tempfile
import time
import unittest

import twtest
from twtest import Server

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENT = os.path.join(ROOT, "clients", "python")
sys.path.insert(0, CLIENT)

import trainwatch  # noqa: E402

try:
    import pandas  # noqa: F401
    HAVE_PANDAS = True
except ImportError:
    HAVE_PANDAS = False

N = 300              # steps per rank of the ranked run
PROJECT = "readapi"
ODD_PROJECT = 'we"ird \\ proj'  # needs quoting and escaping in a filter


def ddp_loss(rank, step):
    return (rank + 1) * 1000 + step * 0.5


def norm(v):
    """NaN as a string, so rows with NaN compare equal."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def strip_ts(rows):
    return [norm({k: v for k, v in r.items() if k != "_timestamp"}) for r in rows]


class ReadApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-pyread-e2e-")
        cls.server = Server(os.path.join(cls.tmp, "data")).start()
        cls.url = "http://127.0.0.1:%d" % cls.server.port
        try:
            cls.log_runs()
        except BaseException:
            cls.server.stop_quietly()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise
        cls.api = trainwatch.Api(cls.url)

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.server.stop_quietly()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def run_of(cls, **kw):
        kw.setdefault("url", cls.url)
        kw.setdefault("spool_dir", os.path.join(cls.tmp, "spool"))
        kw.setdefault("capture_output", False)
        kw.setdefault("install_hooks", False)
        kw.setdefault("flush_interval", 0.05)
        return trainwatch.Run(**kw)

    @classmethod
    def log_runs(cls):
        # A two-rank run: two Run objects with one id; rank 0 also logs lr every 10 steps.
        cls.ddp_t0 = time.time()
        ranks = [cls.run_of(project=PROJECT, name="ddp", id="readapi-ddp", rank=r, world_size=2,
                            config={"lr": 0.01, "opt": "adam", "clip": float("inf")}, tags=["ddp", "sweep"])
                 for r in (0, 1)]
        for s in range(N):
            for r, run in enumerate(ranks):
                values = {"loss": ddp_loss(r, s)}
                if r == 1 and s == N - 1:
                    values["r1_only"] = 7.0
                if r == 0 and s % 10 == 0:
                    values["lr"] = 0.01 / (1 + s)
                run.log(values, step=s)
        for run in reversed(ranks):  # rank 0 (the status) last
            run.finish()
        cls.ddp_t1 = time.time()
        cls.ddp = ranks[0]

        # A plain run: steps 100..199 logged before 0..99, step 150 logged again last
        # (a resume: the later write wins), NaN and infinities, val_loss every 50 steps.
        plain = cls.run_of(project=ODD_PROJECT, name="plain", config={"lr": 0.001, "opt": "sgd", "nested": {"depth": 3}},
                           tags=["base"])
        cls.plain_expected = {}
        cls.plain_t = {}

        def log(step, values):
            before = time.time()
            plain.log(values, step=step)
            cls.plain_t[step] = (before, time.time())  # the point's time lies between
            cls.plain_expected.setdefault(step, {"_step": step}).update(values)

        for s in list(range(100, 200)) + list(range(100)):
            values = {"loss": 2.0 / (1 + s)}
            if s == 7:
                values["loss"] = float("nan")
            if s == 8:
                values["loss"] = float("inf")
            if s == 9:
                values["loss"] = float("-inf")
            if s % 50 == 0:
                values["val_loss"] = 3.0 / (1 + s)
            log(s, values)
            if s == 199:
                time.sleep(0.02)  # the two halves are apart in time
        time.sleep(0.02)
        log(150, {"loss": -1.5})
        plain.summary["best"] = float("nan")
        plain.alert("eval done", "val loss 0.41", level="warning")
        plain.finish()
        cls.plain = plain

        # A third run in PROJECT, finished as failed.
        other = cls.run_of(project=PROJECT, name="other", config={"lr": 0.1, "opt": "adam"})
        other.log({"loss": 1.0}, step=0)
        other.finish("failed")
        cls.other = other
        for run in (ranks[0], ranks[1], plain, other):
            assert run.spooled == 0, run

    # ---- runs ----------------------------------------------------------------------
    def ids(self, runs):
        return [r.id for r in runs]

    def test_runs_filtered_by_config(self):
        api = self.api
        self.assertEqual(self.ids(api.runs('config.opt = "adam" and config.lr < 0.05')), [self.ddp.id])
        self.assertEqual(self.ids(api.runs({"config.opt": "sgd"})), [self.plain.id])
        self.assertEqual(self.ids(api.runs("config.nested.depth >= 3")), [self.plain.id])
        self.assertEqual(sorted(self.ids(api.runs('config.opt = "adam"'))), sorted([self.ddp.id, self.other.id]))
        self.assertEqual(self.ids(api.runs({"config.opt": "adam", "status": "failed"})), [self.other.id])
        self.assertEqual(self.ids(api.runs('tags contains "sweep" or config.lr > 0.05', sort="name", order="asc")),
                         [self.ddp.id, self.other.id])
        self.assertEqual(self.ids(api.runs('config.opt = "none"')), [])
        all_runs = api.runs()
        self.assertEqual(len(all_runs), 3)
        starts = [r.start_time for r in all_runs]
        self.assertEqual(starts, sorted(starts, reverse=True))  # newest first
        self.assertEqual(self.ids(api.runs(sort="name", order="asc")),
                         [self.ddp.id, self.other.id, self.plain.id])
        self.assertEqual(self.ids(api.runs(sort="name", order="asc", limit=1, offset=1)), [self.other.id])

    def test_runs_by_project(self):
        api = self.api
        self.assertEqual(sorted(self.ids(api.runs(project=PROJECT))), sorted([self.ddp.id, self.other.id]))
        self.assertEqual(self.ids(api.runs(project=ODD_PROJECT)), [self.plain.id])
        self.assertEqual(self.ids(api.runs("config.lr > 0.05", project=PROJECT)), [self.other.id])
        self.assertEqual(self.ids(api.runs("config.lr > 0.05 or config.lr < 0.005", project=PROJECT)),
                         [self.other.id])  # the filter is parenthesised before `and project = ...`
        self.assertEqual(self.ids(api.runs({"config.opt": "sgd"}, project=PROJECT)), [])
        self.assertEqual(api.runs(project="nope"), [])
        self.assertEqual(trainwatch.api.filter_quote('a"b\\c'), '"a\\"b\\\\c"')
        self.assertEqual(trainwatch.api.filter_quote(None), "null")
        self.assertEqual(trainwatch.api.filter_quote(True), "true")
        self.assertEqual(trainwatch.api.filter_quote(3), "3")

    def test_run_info(self):
        run = self.api.run(self.plain.id)
        self.assertIsInstance(run, trainwatch.RunInfo)
        self.assertEqual((run.id, run.name, run.project, run.state, run.status),
                         (self.plain.id, "plain", ODD_PROJECT, "finished", "finished"))
        self.assertEqual(run.config, {"lr": 0.001, "opt": "sgd", "nested": {"depth": 3}})
        self.assertEqual(run.tags, ["base"])
        self.assertTrue(math.isnan(run.summary["best"]))
        self.assertEqual(run.summary["loss"], -1.5)  # the last value logged (step 150, logged last)
        self.assertEqual(run.step, 150)
        self.assertEqual([(a["title"], a["text"], a["level"]) for a in run.alerts],
                         [("eval done", "val loss 0.41", "warning")])
        d = run.to_dict()
        self.assertEqual(d["id"], self.plain.id)
        self.assertEqual(d["alerts"], run.alerts)
        with self.assertRaises(AttributeError):
            run.no_such_field
        ddp = self.api.run(self.ddp.id)
        self.assertEqual(ddp.world_size, 2)
        self.assertEqual(ddp.config, {"lr": 0.01, "opt": "adam", "clip": math.inf})  # "Inf" read back as inf
        self.assertEqual(ddp.summary["loss"], ddp_loss(0, N - 1))  # rank 0 sets the summary
        self.assertEqual(sorted(ddp.tags), ["ddp", "sweep"])
        self.assertEqual(self.api.run(self.other.id).state, "failed")
        self.assertIs(ddp.refresh(), ddp)
        self.assertEqual(ddp.state, "finished")
        self.assertIn("readapi-ddp", repr(ddp))

    # ---- history -------------------------------------------------------------------
    def test_history_every_step(self):
        rows = self.api.run(self.plain.id).history(pandas=False)
        self.assertIsInstance(rows, list)
        want = [self.plain_expected[s] for s in sorted(self.plain_expected)]
        self.assertEqual(len(rows), 200)
        self.assertEqual(strip_ts(rows), norm(want))
        self.assertTrue(math.isnan(rows[7]["loss"]))
        self.assertEqual((rows[8]["loss"], rows[9]["loss"]), (math.inf, -math.inf))
        self.assertNotIn("val_loss", rows[1])       # absent where not logged
        self.assertEqual(rows[50]["val_loss"], 3.0 / 51)
        self.assertNotIn("_rank", rows[0])           # one rank: no _rank column
        for r in rows:
            # the time of the step's (last) log() call, in unix seconds
            before, after = self.plain_t[r["_step"]]
            self.assertGreaterEqual(r["_timestamp"], math.floor(before * 1000) / 1000.0 - 1e-6)
            self.assertLessEqual(r["_timestamp"], after + 1e-6)
        self.assertEqual(self.api.scan_history(self.plain.id), rows)
        self.assertEqual(self.api.run(self.plain.id).scan_history(), rows)

    def test_history_keys_start_end(self):
        api = self.api
        rows = api.history(self.plain.id, keys=["val_loss"], pandas=False)
        self.assertEqual(strip_ts(rows), [{"_step": s, "val_loss": 3.0 / (1 + s)} for s in (0, 50, 100, 150)])
        rows = api.history(self.plain.id, keys="loss", start=48, end=52, pandas=False)
        self.assertEqual(strip_ts(rows), [{"_step": s, "loss": 2.0 / (1 + s)} for s in range(48, 53)])
        rows = api.history(self.plain.id, start=150, end=150, pandas=False)
        self.assertEqual(strip_ts(rows), [{"_step": 150, "loss": -1.5, "val_loss": 3.0 / 151}])
        self.assertEqual(api.history(self.plain.id, keys="nope", pandas=False), [])
        self.assertEqual(api.history(self.plain.id, start=1000, pandas=False), [])

    def test_history_ranks(self):
        rows = self.api.history(self.ddp.id, pandas=False)
        self.assertEqual(len(rows), 2 * N)
        want = []
        for s in range(N):
            for r in (0, 1):
                row = {"_step": s, "_rank": r, "loss": ddp_loss(r, s)}
                if r == 0 and s % 10 == 0:
                    row["lr"] = 0.01 / (1 + s)
                want.append(row)
        want[-1]["r1_only"] = 7.0
        self.assertEqual(strip_ts(rows), want)
        # a key only rank 1 logged: its rows still say which rank
        self.assertEqual(strip_ts(self.api.history(self.ddp.id, keys="r1_only", pandas=False)),
                         [{"_step": N - 1, "_rank": 1, "r1_only": 7.0}])
        # a key only rank 0 logged: rank 0 alone, as in a plain run, no "_rank" unless asked for
        self.assertNotIn("_rank", self.api.history(self.ddp.id, keys="lr", pandas=False)[0])
        self.assertEqual(self.api.history(self.ddp.id, keys="lr", rank=0, pandas=False)[0]["_rank"], 0)
        for r in rows:
            self.assertGreaterEqual(r["_timestamp"], self.ddp_t0 - 0.002)
            self.assertLessEqual(r["_timestamp"], self.ddp_t1 + 0.002)
        one = self.api.run(self.ddp.id).history(rank=1, keys="loss", start=10, end=12, pandas=False)
        self.assertEqual(strip_ts(one), [{"_step": s, "_rank": 1, "loss": ddp_loss(1, s)} for s in (10, 11, 12)])
        rank0 = self.api.history(self.ddp.id, rank=0, pandas=False)
        self.assertEqual(strip_ts(rank0), [w for w in want if w["_rank"] == 0])
        self.assertEqual(self.api.history(self.ddp.id, rank=5, pandas=False), [])

    def test_history_time_order(self):
        rows = self.api.history(self.plain.id, x="time", pandas=False)
        # logged: 100..199 (without 150, logged again last), then 0..99, then 150
        order = [s for s in range(100, 200) if s != 150] + list(range(100)) + [150]
        self.assertEqual([r["_step"] for r in rows], order)
        ts = [r["_timestamp"] for r in rows]
        self.assertEqual(ts, sorted(ts))
        self.assertEqual(rows[-1]["loss"], -1.5)
        # start/end are times for x="time"
        mid = self.plain_t[199][1] + 0.01  # between the halves (0.02 s apart)
        later = self.api.history(self.plain.id, x="time", start=mid, pandas=False)
        self.assertEqual([r["_step"] for r in later], list(range(100)) + [150])
        earlier = self.api.history(self.plain.id, x="time", end=mid, pandas=False)
        self.assertEqual([r["_step"] for r in earlier], [s for s in range(100, 200) if s != 150])
        import datetime
        since = self.api.history(self.plain.id, x="time", pandas=False,
                                 start=datetime.datetime.fromtimestamp(mid, datetime.timezone.utc))
        self.assertEqual(since, later)
        ranked = self.api.history(self.ddp.id, x="time", keys="loss", pandas=False)
        self.assertEqual(len(ranked), 2 * N)
        ts = [r["_timestamp"] for r in ranked]
        self.assertEqual(ts, sorted(ts))

    # ---- errors --------------------------------------------------------------------
    def test_errors(self):
        api = self.api
        with self.assertRaises(trainwatch.ApiError) as cm:
            api.run("nope")
        self.assertEqual(cm.exception.status, 404)
        self.assertIn('run "nope" not found', str(cm.exception))
        with self.assertRaises(trainwatch.ApiError) as cm:
            api.history("nope")
        self.assertEqual(cm.exception.status, 404)
        self.assertIn('run "nope" not found', str(cm.exception))
        with self.assertRaises(trainwatch.ApiError) as cm:
            api.run("a/../b")  # quoted as one path segment: an unknown run, not another route
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(trainwatch.ApiError) as cm:
            api.runs("config.lr >")
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("filter: position", cm.exception.message)
        with self.assertRaises(trainwatch.ApiError) as cm:
            api.runs(sort="bogus")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(ValueError):
            api.history(self.plain.id, x="wall")
        with self.assertRaises(ValueError):
            api.runs({"config.lr": float("nan")})
        dead = trainwatch.Api("http://127.0.0.1:%d" % twtest.free_port(), timeout=2)
        with self.assertRaises(trainwatch.ApiError) as cm:
            dead.runs()
        self.assertIsNone(cm.exception.status)
        self.assertIn("unreachable", str(cm.exception))

    def test_default_url(self):
        old = os.environ.get("TRAINWATCH_URL")
        os.environ["TRAINWATCH_URL"] = self.url + "/"
        try:
            with trainwatch.Api() as api:
                self.assertEqual(api.url, self.url)
                self.assertEqual(len(api.runs()), 3)
            del os.environ["TRAINWATCH_URL"]
            self.assertEqual(trainwatch.Api().url, "http://127.0.0.1:9800")
        finally:
            if old is None:
                os.environ.pop("TRAINWATCH_URL", None)
            else:
                os.environ["TRAINWATCH_URL"] = old

    # ---- pandas --------------------------------------------------------------------
    @unittest.skipIf(HAVE_PANDAS, "pandas is importable: the DataFrame branch is tested instead")
    def test_without_pandas(self):
        rows = self.api.history(self.plain.id)  # pandas=None: the list where pandas is missing
        self.assertIsInstance(rows, list)
        self.assertEqual(len(rows), 200)
        with self.assertRaises(ImportError):
            self.api.history(self.plain.id, pandas=True)

    @unittest.skipUnless(HAVE_PANDAS, "pandas not importable (Debian: python3-pandas)")
    def test_pandas(self):
        import pandas as pd
        df = self.api.run(self.plain.id).history()
        self.assertIsInstance(df, pd.DataFrame)
        self.assertEqual(list(df.columns), ["_step", "_timestamp", "loss", "val_loss"])
        self.assertEqual(list(df["_step"]), list(range(200)))
        self.assertTrue(math.isnan(df["loss"][7]))
        self.assertEqual(df["loss"][150], -1.5)
        self.assertTrue(math.isnan(df["val_loss"][1]))  # absent: NaN in a frame
        self.assertEqual(df["val_loss"][50], 3.0 / 51)
        ddp = self.api.history(self.ddp.id, pandas=True)
        self.assertEqual(list(ddp.columns), ["_step", "_rank", "_timestamp", "loss", "lr", "r1_only"])
        self.assertEqual(len(ddp), 2 * N)
        self.assertEqual(list(ddp[ddp["_rank"] == 1]["loss"]), [ddp_loss(1, s) for s in range(N)])
        self.assertIsInstance(self.api.history(self.plain.id, pandas=False), list)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python_read_api_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
