#!/usr/bin/env python3
"""End-to-end test of experiment tracking (docs/runs-api.md) against the real
trainwatch binary: runs, batches (duplicates, rejected values), kill -9 and
restart with every acknowledged step present exactly once (/api/v1/runs/metrics)
and the TSDB's time view of them (PromQL, export), points far in the future
or older than the retention (kept by step, never in the TSDB's future),
the history endpoint (JSON and CSV), filters, and crash marking by
heartbeat timeout.

Usage: runs_e2e_test.py /path/to/trainwatch [unittest args]
"""
import http.client
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import twtest
from twtest import Server

POINTS_PER_BATCH = 10


def loss_at(step):
    return round(2.0 / (1 + step / 10.0), 6)


class RunsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-runs-e2e-")
        self.data = os.path.join(self.tmp, "data")
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *extra):
        self.server = Server(self.data, extra_args=list(extra)).start()
        return self.server

    def call(self, method, path, obj=None, want=200):
        body = json.dumps(obj).encode() if obj is not None else None
        status, data = self.server.request(method, path, body=body, headers={"Content-Type": "application/json"})
        self.assertEqual(status, want, "%s %s: %r" % (method, path, data[:500]))
        return json.loads(data) if data else None

    def query(self, expr):
        doc = self.call("GET", "/api/v1/query?query=" + urllib.parse.quote(expr))
        return doc["data"]["result"]

    def batch(self, run_id, b, base_ts, extra_values=None):
        pts = []
        for i in range(POINTS_PER_BATCH):
            step = b * POINTS_PER_BATCH + i
            vals = {"loss": loss_at(step), "train/acc": step / 1000.0}
            pts.append({"step": step, "ts": base_ts + step, "values": vals})
        if extra_values:
            pts[0]["values"].update(extra_values)
        return {"batch_id": "%s.r.%d" % (run_id, b), "points": pts}

    @staticmethod
    def time_view(points):
        """What the TSDB gets of one batch's finite points [(step, ts, value)]:
        per second of the points' time, the last point's (ts, step, value)."""
        last = {}
        for step, ts, v in points:
            last[ts // 1000] = (ts, step, v)
        return sorted(last.values())

    def test_batches_survive_kill9_exactly_once(self):
        s = self.start("--runs.heartbeat-timeout", "1h")
        run = self.call("POST", "/api/v1/runs", {
            "id": "e2e1", "project": "e2e", "name": "first", "config": {"lr": 3e-4, "opt": {"name": "adamw"}},
            "tags": ["llama", "sweep"], "total_steps": 100000, "host": "h1", "pid": 1, "command": "train.py"})["data"]
        self.assertEqual(run["name"], "first")
        self.assertEqual(run["status"], "running")
        other = self.call("POST", "/api/v1/runs", {"id": "e2e2", "project": "e2e", "name": "first",
                                                   "config": {"lr": 1e-5}, "tags": ["gpt"]})["data"]
        self.assertEqual(other["name"], "first-2")  # unique within the project

        base_ts = int(time.time() * 1000) - 3600 * 1000
        # A batch with a value and a key the server cannot store: the rest is kept.
        r = self.call("POST", "/api/v1/runs/e2e1/batches",
                      self.batch("e2e1", 0, base_ts, {"bad": "oops", "": 1}))["data"]
        self.assertEqual(r["accepted"], 2 * POINTS_PER_BATCH)
        self.assertFalse(r["duplicate"])
        self.assertEqual(sorted(x["key"] for x in r["rejected"]), ["", "bad"])
        self.assertTrue(all(x["point"] == 0 for x in r["rejected"]))
        # The same batch again is a duplicate and stores nothing.
        r = self.call("POST", "/api/v1/runs/e2e1/batches", self.batch("e2e1", 0, base_ts))["data"]
        self.assertTrue(r["duplicate"])
        # A malformed body is a 400 naming the field, and nothing of it is stored.
        bad = self.batch("e2e1", 999, base_ts)
        bad["points"][3]["values"] = [1, 2]
        err = self.call("POST", "/api/v1/runs/e2e1/batches", bad, want=400)
        self.assertEqual(err["status"], "error")
        self.assertIn("points[3].values", err["error"])
        err = self.call("POST", "/api/v1/runs/nope/batches", self.batch("nope", 1, base_ts), want=404)
        self.assertEqual(err["errorType"], "not_found")

        # Batches from a thread; kill -9 once some are acknowledged.
        acked = {0}
        state = {"next": 1}
        port = s.port

        def sender():
            b = 1
            while b < 400:
                body = json.dumps(self.batch("e2e1", b, base_ts)).encode()
                try:
                    st, _ = twtest.request(port, "POST", "/api/v1/runs/e2e1/batches", body=body, timeout=30)
                except (OSError, http.client.HTTPException):
                    break  # killed mid-request: this batch is unacknowledged
                if st != 200:
                    break
                acked.add(b)
                b += 1
                state["next"] = b

        t = threading.Thread(target=sender)
        t.start()
        deadline = time.time() + 120
        while len(acked) < 15 and t.is_alive() and time.time() < deadline:
            time.sleep(0.01)
        s.kill9()
        s.stop_quietly()
        t.join()
        self.assertGreaterEqual(len(acked), 15)
        first_unacked = state["next"]

        s = self.start("--runs.heartbeat-timeout", "1h")
        # The client re-sends from its oldest unacknowledged batch, with the same
        # ids; whether the killed server stored it or not, it lands once.
        r = self.call("POST", "/api/v1/runs/e2e1/batches", self.batch("e2e1", first_unacked - 1, base_ts))["data"]
        self.assertTrue(r["duplicate"])  # acknowledged before the kill: remembered
        last = first_unacked + 5
        for b in range(first_unacked, last):
            r = self.call("POST", "/api/v1/runs/e2e1/batches", self.batch("e2e1", b, base_ts))["data"]
            if b == first_unacked and r["duplicate"]:
                continue  # stored and recorded, but the answer died with the server
            self.assertFalse(r["duplicate"])
            self.assertEqual(r["accepted"], 2 * POINTS_PER_BATCH)
        steps = list(range(last * POINTS_PER_BATCH))

        # The TSDB's time view (PromQL, export): per batch and second, the
        # last point, with trainwatch_run_step at the same timestamp.
        view = []
        for b in range(last):
            view += self.time_view([(st, base_ts + st, loss_at(st))
                                    for st in range(b * POINTS_PER_BATCH, (b + 1) * POINTS_PER_BATCH)])
        view.sort()
        self.assertLess(len(view), len(steps))
        res = self.query('count_over_time(loss{project="e2e",run="first"}[2h])')
        self.assertEqual(len(res), 1, res)
        self.assertEqual(int(res[0]["value"][1]), len(view))
        exported = s.export('{project="e2e",run="first",__name__=~"loss|trainwatch_run_step|train:acc"}')
        by_name = {dict(k)["__name__"]: v for k, v in exported.items()}
        self.assertEqual(by_name["loss"], [(ts, v) for ts, _, v in view])
        self.assertEqual(by_name["trainwatch_run_step"], [(ts, float(st)) for ts, st, _ in view])
        self.assertEqual(by_name["train:acc"], [(ts, st / 1000.0) for ts, st, _ in view])

        # The runs metrics API: by step at full resolution, then downsampled.
        m = self.call("GET", "/api/v1/runs/metrics?ids=e2e1&keys=loss,train/acc&points=100000")["data"]
        self.assertEqual([x["key"] for x in m], ["loss", "train/acc"])
        self.assertEqual([p["x"] for p in m[0]["points"]], steps)
        self.assertEqual([p["last"] for p in m[0]["points"]], [loss_at(st) for st in steps])
        self.assertTrue(all(p["count"] == 1 for p in m[0]["points"]))
        m = self.call("GET", "/api/v1/runs/metrics?ids=e2e1&keys=loss&points=7&smoothing=0.9")["data"]
        buckets = m[0]["points"]
        self.assertLessEqual(len(buckets), 7)
        self.assertEqual(sum(p["count"] for p in buckets), len(steps))
        self.assertEqual(buckets[0]["max"], loss_at(0))             # loss falls: the max is the first
        self.assertEqual(buckets[-1]["last"], loss_at(steps[-1]))
        self.assertEqual(buckets[-1]["min"], loss_at(steps[-1]))
        self.assertIn("ema", buckets[0])
        m = self.call("GET", "/api/v1/runs/metrics?ids=e2e1,e2e2&keys=loss&x=time&points=3")["data"]
        self.assertEqual(len(m), 1)  # e2e2 logged nothing
        self.call("GET", "/api/v1/runs/metrics?ids=e2e1,zzz", want=404)
        self.call("GET", "/api/v1/runs/metrics?ids=e2e1&smoothing=1", want=400)

        # The run, its series and its state.
        run = self.call("GET", "/api/v1/runs/e2e1")["data"]
        self.assertEqual(run["step"], steps[-1])
        self.assertEqual(run["config"], {"lr": 3e-4, "opt": {"name": "adamw"}})
        self.assertEqual(run["summary"]["loss"], loss_at(steps[-1]))
        self.assertAlmostEqual(run["progress"], steps[-1] / 100000.0)
        self.assertEqual(run["alerts"], [])
        self.assertEqual(self.query('trainwatch_run_active{project="e2e",run="first"}')[0]["value"][1], "1")
        self.assertEqual(len(self.query('trainwatch_run_progress_ratio{project="e2e",run="first"}')), 1)

        # Filters.
        def ids(expr, **extra):
            q = {"filter": expr}
            q.update(extra)
            return [r["id"] for r in self.call("GET", "/api/v1/runs?" + urllib.parse.urlencode(q))["data"]]
        self.assertEqual(ids('config.lr > 1e-4 and tags contains "llama" and metrics.loss < 0.5 and status = "running"'),
                         ["e2e1"])
        self.assertEqual(ids('config.opt.name = "adamw" or tags contains "gpt"'), ["e2e2", "e2e1"])  # newest first
        self.assertEqual(ids("project = 'e2e'", sort="name", order="asc"), ["e2e1", "e2e2"])
        self.assertEqual(ids("name =~ 'first-.*'"), ["e2e2"])
        err = self.call("GET", "/api/v1/runs?filter=" + urllib.parse.quote("config.lr >> 1"), want=400)
        self.assertIn("position 12", err["error"])

        # Alerts and finish.
        self.call("POST", "/api/v1/runs/e2e1/alerts", {"title": "loss spike", "text": "x3", "level": "warning"},
                  want=204)
        self.call("POST", "/api/v1/runs/e2e1/alerts", {"title": "t", "level": "fatal"}, want=400)
        run = self.call("POST", "/api/v1/runs/e2e1/finish", {"status": "finished", "summary": {"best": 0.1}})["data"]
        self.assertEqual(run["status"], "finished")
        self.assertIsNotNone(run["end_time"])
        run = self.call("GET", "/api/v1/runs/e2e1")["data"]
        self.assertEqual([a["title"] for a in run["alerts"]], ["loss spike"])
        self.assertEqual(run["summary"]["best"], 0.1)
        self.assertEqual(self.query('trainwatch_run_active{project="e2e",run="first"}')[0]["value"][1], "0")
        self.assertEqual(s.terminate(), 0)
        s.stop_quietly()
        s = self.start()
        self.assertEqual(self.call("GET", "/api/v1/runs/e2e1")["data"]["status"], "finished")  # SQLite kept it

    def test_points_kept_by_step_whatever_their_time(self):
        # A point a day ahead (a client clock far off) and one older than the
        # TSDB's retention are stored by step; the TSDB's time view skips the
        # old one and holds the future one at the server's clock. A NaN in a
        # second wins that second's sample. No client: raw HTTP.
        self.start("--retention.time", "1d")
        self.call("POST", "/api/v1/runs", {"id": "fut", "project": "e2e", "name": "future"})
        now = int(time.time() * 1000)
        sec = (now - 5000) // 1000 * 1000  # a whole second, 4-5 s ago
        old, ahead = now - 2 * 86400 * 1000, now + 86400 * 1000
        pts = [(0, old, 0.5), (1, sec + 100, 1.0), (2, sec + 200, "NaN"), (3, sec + 300, 3.0), (4, ahead, 4.0)]
        before = time.time()
        r = self.call("POST", "/api/v1/runs/fut/batches", {"batch_id": "fut.1", "points": [
            {"step": st, "ts": ts, "values": {"loss": v}} for st, ts, v in pts]})["data"]
        after = time.time()
        self.assertEqual((r["accepted"], r["rejected"], r["duplicate"]), (len(pts), [], False))

        # History: every point as logged, by step, with its own time.
        h = self.call("GET", "/api/v1/runs/fut/history?keys=loss")["data"]
        self.assertEqual(len(h), 1, h)
        self.assertEqual((h[0]["key"], h[0]["metric"]), ("loss", "loss"))
        self.assertEqual(h[0]["labels"], {})  # a run without ranks
        self.assertEqual(h[0]["steps"], [st for st, _, _ in pts])
        self.assertEqual(h[0]["timestamps"], [ts for _, ts, _ in pts])
        self.assertEqual(h[0]["values"], [v for _, _, v in pts])
        m = self.call("GET", "/api/v1/runs/metrics?ids=fut&keys=loss&x=step&points=100")["data"]
        self.assertEqual([(p["x"], p["last"]) for p in m[0]["points"]], [(st, v) for st, _, v in pts])
        m = self.call("GET", "/api/v1/runs/metrics?ids=fut&keys=loss&x=time&points=100")["data"]
        self.assertEqual(len(m[0]["points"]), len(pts))
        for p, (_, ts, _) in zip(m[0]["points"], pts):
            self.assertAlmostEqual(p["x"], ts / 1000.0, places=3)

        # CSV: a header and one line per point; rank empty without ranks.
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            conn.request("GET", "/api/v1/runs/fut/history?keys=loss&format=csv")
            resp = conn.getresponse()
            body = resp.read().decode()
            self.assertEqual(resp.status, 200, body[:500])
            self.assertTrue(resp.getheader("Content-Type", "").startswith("text/csv"), resp.getheaders())
        finally:
            conn.close()
        lines = body.splitlines()
        self.assertEqual(lines[0], "rank,key,step,timestamp,value")
        self.assertEqual(len(lines), 1 + len(pts), lines)
        for line, (st, ts, v) in zip(lines[1:], pts):
            rank, key, step, t, val = line.split(",")
            self.assertEqual((rank, key, step, t), ("", "loss", str(st), "%d.%03d" % divmod(ts, 1000)), line)
            if v == "NaN":
                self.assertTrue(math.isnan(float(val)), line)
            else:
                self.assertEqual(float(val), v, line)

        # The TSDB: nothing later than the server's clock, nothing older than the retention.
        series = self.server.export('{project="e2e",run="future"}')
        for labels, samples in series.items():
            for ts, _ in samples:
                self.assertLessEqual(ts, (time.time() + 1) * 1000, labels)
                self.assertGreater(ts, old, labels)
        by_name = {dict(k)["__name__"]: v for k, v in series.items()}
        loss = by_name["loss"]
        self.assertEqual(len(loss), 2, loss)
        self.assertEqual(loss[0][0], sec + 300)  # the second's last point, with the NaN it held
        self.assertIsNone(loss[0][1], loss)  # export writes NaN as null
        self.assertGreaterEqual(loss[1][0], int(before * 1000) - 1)  # the future point at the server's clock
        self.assertLessEqual(loss[1][0], int(after * 1000) + 1)
        self.assertEqual(loss[1][1], 4.0)
        steps = dict(by_name["trainwatch_run_step"])
        self.assertEqual((steps.get(sec + 300), steps.get(loss[1][0])), (3.0, 4.0))

    def test_silent_run_is_marked_crashed(self):
        self.start("--runs.heartbeat-timeout", "1s")
        self.call("POST", "/api/v1/runs", {"id": "quiet", "project": "e2e", "total_steps": 10})
        self.call("POST", "/api/v1/runs", {"id": "done", "project": "e2e"})
        self.call("POST", "/api/v1/runs/done/finish", {"status": "failed"})
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.call("GET", "/api/v1/runs/quiet")["data"]["status"] == "crashed":
                break
            time.sleep(0.1)
        run = self.call("GET", "/api/v1/runs/quiet")["data"]
        self.assertEqual(run["status"], "crashed")
        self.assertIsNotNone(run["end_time"])
        self.assertEqual(self.call("GET", "/api/v1/runs/done")["data"]["status"], "failed")
        self.assertEqual(self.query('trainwatch_run_active{project="e2e",run="quiet"}')[0]["value"][1], "0")
        self.assertEqual([r["id"] for r in self.call("GET", "/api/v1/runs?filter=status%3D%22crashed%22")["data"]],
                         ["quiet"])
        # A heartbeat shows it was only silent.
        self.call("POST", "/api/v1/runs/quiet/heartbeat", {}, want=204)
        self.call("POST", "/api/v1/runs/zzz/heartbeat", {}, want=404)
        self.assertIn(self.call("GET", "/api/v1/runs/quiet")["data"]["status"], ("running", "crashed"))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: runs_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
