#!/usr/bin/env python3
"""End-to-end test of `make run`'s demo training job (demo/training_job.py)
against the real trainwatch binary.

Usage: demo_job_e2e_test.py /path/to/trainwatch [unittest args]
"""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "demo", "training_job.py")


class DemoJobTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-demo-e2e-")
        self.server = Server(os.path.join(self.tmp, "data")).start()
        self.demo = None

    def tearDown(self):
        if self.demo:
            self.demo.stop()
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, expr, at=None):
        path = "/api/v1/query?query=" + urllib.parse.quote(expr)
        if at is not None:
            path += "&time=%.3f" % at
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]["result"]

    def wait_for(self, expr, pred, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            res = self.query(expr)
            if pred(res):
                return res
            self.assertIsNone(self.demo.proc.poll(), "demo job exited: " + self.demo.logs())
            time.sleep(0.2)
        self.fail("%s never satisfied the condition; last %r; demo log: %s" % (expr, res, self.demo.logs()))

    def test_baseline_and_live_run_land(self):
        url = "http://127.0.0.1:%d" % self.server.port
        self.demo = Process([sys.executable, DEMO, "--url", url, "--rate", "100", "--steps", "1000"],
                            os.path.join(self.tmp, "demo.log"))
        # The live run advances step by step.
        live = self.wait_for('trainwatch_run_step{project="demo",run=~"live-.*"}',
                             lambda r: len(r) == 1 and float(r[0]["value"][1]) >= 500)
        run = live[0]["metric"]["run"]
        # Every step landed once: one loss sample per step, none missing, none
        # twice. At a time two push intervals back every step is in.
        at = time.time() - 2.5
        step = float(self.query('trainwatch_run_step{run="%s"}' % run, at)[0]["value"][1])
        count = float(self.query('count_over_time(loss{run="%s"}[1h])' % run, at)[0]["value"][1])
        self.assertGreater(step, 0)
        self.assertEqual(count, step)
        # The finished baseline run: 7200 steps logged every 10 steps, loss converging.
        base = self.query('count_over_time(loss{project="demo",run="baseline"}[3h])')
        self.assertEqual(float(base[0]["value"][1]), 721)
        first = self.query('loss{run="baseline"} offset 119m')[0]["value"][1]
        last = self.query('last_over_time(loss{run="baseline"}[5m])')[0]["value"][1]
        self.assertLess(float(last), float(first) / 2)
        self.assertEqual(self.query('trainwatch_run_active{run="baseline"}')[0]["value"][1], "0")
        for key in ("lr", "grad_norm", "samples_per_sec", "step_time_seconds", "trainwatch_run_total_steps",
                    "trainwatch_run_heartbeat_timestamp_seconds", "trainwatch_run_start_timestamp_seconds"):
            self.assertTrue(self.query('%s{run="%s"}' % (key, run)), key)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: demo_job_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
