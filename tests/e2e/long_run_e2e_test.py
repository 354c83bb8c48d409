#!/usr/bin/env python3
"""A default `trainwatch serve` through a day and a half of server time
(issue 17): the clock warped 3600 times (--debug.clock-speed, base/clock.h),
collectors, rule pack and self-scrape on, `trainwatch demo` on the same clock,
log lines pushed at server time. Checks that the loops run at the warped pace,
that the head is cut into blocks, the WAL checkpointed, blocks
and log partitions past retention deleted, nothing refused or skipped, and the
demo's run alive throughout. bench/soak runs the same for 30 days with
default retention, where compaction levels merge (blocks grow to a tenth of
the retention: at 6 h they stay 2 h).

Usage: long_run_e2e_test.py /path/to/trainwatch [unittest args]
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server

SPEED = 3600            # one server hour per real second
START_S = 1767225600    # 2026-01-01T00:00:00Z: log partitions (a day each) start at the clock's start
HOURS = 32              # of server time
RETENTION = "6h"
HOUR_MS = 3600 * 1000


class LongRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-long-run-e2e-")
        self.server = self.demo = None
        self.origin_s = time.time() + 2
        self.clock_flags = ["--debug.clock-speed", str(SPEED), "--debug.clock-start", str(START_S),
                            "--debug.clock-origin", "%.3f" % self.origin_s]

    def tearDown(self):
        if self.demo:
            self.demo.stop()
        if self.server:
            self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def now_ms(self):
        """Server time, by the formula the server uses."""
        return START_S * 1000 + int((time.time() - self.origin_s) * 1000 * SPEED)

    def query(self, q, t_ms):
        status, body = self.server.request("GET", "/api/v1/query?" + urllib.parse.urlencode({"query": q,
                                                                                              "time": t_ms / 1000}))
        self.assertEqual(status, 200, body[:300])
        return json.loads(body)["data"]["result"]

    def full_log(self):
        with open(self.server.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def blocks(self):
        out = []
        data = os.path.join(self.tmp, "data")
        for name in os.listdir(data):
            try:
                with open(os.path.join(data, name, "meta.json")) as f:
                    out.append(json.load(f))
            except (NotADirectoryError, FileNotFoundError, ValueError):
                pass
        return out

    def test_a_default_serve_compacts_and_retains(self):
        # A 2 h heartbeat timeout is two real seconds here: the default 5 m (83 ms) would mark the
        # run crashed whenever a loaded machine (ctest -j, ASan) stalls the demo that long. Unscaled
        # client intervals (30 s real) would still cross it.
        self.server = Server(os.path.join(self.tmp, "data"), self.clock_flags + [
            "--retention.time", RETENTION, "--runs.heartbeat-timeout", "2h"], collect=True).start()
        url = "http://127.0.0.1:%d" % self.server.port
        self.demo = Process([twtest.BINARY, "demo", "--url", url, "--rate", "20", "--steps", "100000", "--runs", "1",
                             "--baseline", "false", "--spool-dir", os.path.join(self.tmp, "spool")] + self.clock_flags,
                            os.path.join(self.tmp, "demo.log"))
        # A training job's log lines, one per server minute, stamped with server time.
        pushed = []
        stop = threading.Event()

        def push_logs():
            last = self.now_ms()
            while not stop.wait(0.05):
                now = self.now_ms()
                ts = list(range(last - last % 60000 + 60000, now + 1, 60000))
                if not ts:
                    continue
                body = json.dumps({"streams": [{"stream": {"job": "long-run"}, "values": [
                    [str(t * 1000000), "step at %d" % t] for t in ts]}]}).encode()
                status, resp = self.server.request("POST", "/loki/api/v1/push", body,
                                                   {"Content-Type": "application/json"})
                self.assertEqual(status, 204, resp)
                pushed.extend(ts)
                last = ts[-1]

        pusher = threading.Thread(target=push_logs, daemon=True)
        pusher.start()
        end = START_S * 1000 + HOURS * HOUR_MS
        while self.now_ms() < end:
            self.assertIsNone(self.server.proc.poll(), self.server.logs())
            time.sleep(0.2)
        stop.set()
        pusher.join()
        # Maintenance runs once a server minute: give it a few.
        time.sleep(0.5)
        now = self.now_ms()

        # The loops run at the warped pace: self-scrape every 15 s, host collector every 15 s.
        at = now - 2 * HOUR_MS
        for q in ('count_over_time(up{job="trainwatch"}[1h])', "count_over_time(node_time_seconds[1h])"):
            r = self.query(q, at)
            self.assertEqual(len(r), 1, (q, r))
            # 240 at full pace; a loop slower than 4 ms of real time skips slots, as Prometheus
            # does. Unwarped it would be one sample in 15 server hours.
            self.assertGreaterEqual(float(r[0]["value"][1]), 10, (q, r))
        # node_time_seconds reads the warped clock too: each sample's value is its own server
        # time. The last sample of the last server hour: an instant query's 5 m lookback is 83 ms
        # here, which a loaded machine (ASan, ctest -j) can stall the 15 s loop past.
        r = self.query("node_time_seconds[1h]", now)
        self.assertEqual(len(r), 1, r)
        t, v = r[0]["values"][-1]
        self.assertAlmostEqual(float(v), float(t), delta=600)
        self.assertGreater(float(t), now / 1000 - 3600)
        # The rule pack evaluates on server time.
        status, body = self.server.request("GET", "/api/v1/rules")
        groups = json.loads(body)["data"]["groups"]
        self.assertTrue(groups)
        for g in groups:
            last = g["lastEvaluation"]
            self.assertTrue(last.startswith("2026-01-02T"), (g["name"], last))

        # The head was cut into 2 h blocks, about one each 2 server hours; retention deleted those
        # past 6 h. How many blocks lie on disk at this moment depends on where the maintenance loop
        # is: a cut or a tier merge under ASan takes up to 2 real seconds (2 server hours), so the
        # cuts are counted from the log and one block at least is asked of the disk.
        cuts = self.full_log().count("persisted head up to ")
        self.assertGreaterEqual(cuts, (HOURS - 6) // 2 // 2, self.full_log()[-3000:])
        blocks = self.blocks()
        self.assertGreaterEqual(len(blocks), 1, os.listdir(os.path.join(self.tmp, "data")))
        for b in blocks:
            self.assertEqual(b["maxTime"] - b["minTime"], 2 * HOUR_MS, b)
            # 6 h, plus the time to the next maintenance: the background loop wakes once a real
            # second (an hour here) and more on a loaded machine.
            self.assertGreater(b["maxTime"], now - 9 * HOUR_MS, b)
        self.assertIn("retention: deleting block", self.full_log())
        self.assertTrue(any(n.startswith("checkpoint.") for n in os.listdir(os.path.join(self.tmp, "data"))))
        _, body = self.server.request("GET", "/metrics")
        metrics = body.decode()
        for name in ("trainwatch_tsdb_compaction_series_skipped_total", "trainwatch_tsdb_out_of_order_samples_total"):
            line = next(l for l in metrics.splitlines() if l.startswith(name + " "))
            self.assertEqual(float(line.split()[1]), 0, line)
        for line in metrics.splitlines():
            if line.startswith("trainwatch_tsdb_out_of_bound_samples_total"):
                self.assertEqual(float(line.split()[1]), 0, line)

        # Log partitions: the first day's is gone with its lines; the last 6 h are all there.
        parts = sorted(os.listdir(os.path.join(self.tmp, "data", "logs")))
        self.assertNotIn("logs-%d.db" % START_S, parts)
        self.assertIn("logs-%d.db" % (START_S + 86400), parts)
        recent = [t for t in pushed if t > now - 5 * HOUR_MS]
        self.assertGreaterEqual(len(recent), 4 * 60, "the pusher fell behind")
        status, body = self.server.request("GET", "/api/v1/logs/query?" + urllib.parse.urlencode({
            "query": '{job="long-run"}', "start": "%.3f" % ((now - 5 * HOUR_MS) / 1000), "end": "%.3f" % (now / 1000),
            "limit": "5000"}))
        self.assertEqual(status, 200, body[:300])
        found = sorted(int(l["message"].split()[-1]) for l in json.loads(body)["data"]["lines"])
        self.assertEqual(found, recent)

        # The demo's run is alive: its heartbeats keep pace with the clock.
        self.assertNotIn("crashed: no heartbeat", self.full_log())
        status, body = self.server.request("GET", "/api/v1/runs?filter=" + urllib.parse.quote('project = "demo"'))
        runs = json.loads(body)["data"]
        self.assertEqual([r["status"] for r in runs], ["running"], runs)
        self.assertGreater(runs[0]["step"], 100)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: long_run_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
