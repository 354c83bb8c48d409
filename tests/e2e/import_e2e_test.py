#!/usr/bin/env python3
"""End-to-end test of `trainwatch import mlflow DIR` against the real binary:
an MLflow file store (the layout MLflow's FileStore writes: experiments'
and runs' meta.yaml, params/, tags/, metrics/ with "timestamp value step"
lines, keys with '/' as nested directories) becomes runs with their own
names, times, status, config and every metric line by step; a second import
changes nothing.

Usage: import_e2e_test.py /path/to/trainwatch [unittest args]
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from twtest import Server

T0 = 1700000000000  # Nov 2023: older than any retention the server has


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class ImportMlflowTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-import-e2e-")
        self.mlruns = os.path.join(self.tmp, "mlruns")
        self.server = Server(os.path.join(self.tmp, "data")).start()
        self.url = "http://127.0.0.1:%d" % self.server.port

    def tearDown(self):
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body[:300])
        return json.loads(body)["data"]

    def run_import(self, *extra):
        p = subprocess.run([twtest.BINARY, "import", "mlflow", self.mlruns, "--url", self.url] + list(extra),
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def make_store(self):
        write(self.mlruns, "0/meta.yaml", "artifact_location: file:///x/mlruns/0\nexperiment_id: '0'\n"
                                          "lifecycle_stage: active\nname: Default\n")
        write(self.mlruns, "1/meta.yaml", "artifact_location: file:///x/mlruns/1\nexperiment_id: '1'\n"
                                          "lifecycle_stage: active\nname: bert-sweep\n")
        run = "0123456789abcdef0123456789abcdef"
        write(self.mlruns, "1/%s/meta.yaml" % run,
              "artifact_uri: file:///x/mlruns/1/%s/artifacts\nend_time: %d\nentry_point_name: ''\n"
              "experiment_id: '1'\nlifecycle_stage: active\nrun_id: %s\nrun_name: lr-3e-4\nrun_uuid: %s\n"
              "source_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: %d\nstatus: 3\ntags: []\n"
              "user_id: alice\n" % (run, T0 + 3600000, run, run, T0))
        write(self.mlruns, "1/%s/params/lr" % run, "0.0003")
        write(self.mlruns, "1/%s/params/optimizer" % run, "adamw")
        write(self.mlruns, "1/%s/tags/mlflow.runName" % run, "lr-3e-4")
        write(self.mlruns, "1/%s/tags/mlflow.source.git.commit" % run, "9b96403")
        write(self.mlruns, "1/%s/tags/team" % run, "nlp")
        lines = ["%d %r %d" % (T0 + 1000 * s, 2.0 / (1 + s), s) for s in range(3000)]
        lines[7] = "%d nan 7" % (T0 + 7000)
        lines.append("%d 9.5 10" % (T0 + 5000000))  # step 10 logged again, later: the later value wins
        write(self.mlruns, "1/%s/metrics/loss" % run, "\n".join(lines) + "\n")
        write(self.mlruns, "1/%s/metrics/train/acc" % run, "%d 0.5 0\n%d 0.75 1\n" % (T0, T0 + 1000))
        failed = "fedcba9876543210fedcba9876543210"
        write(self.mlruns, "0/%s/meta.yaml" % failed,
              "run_id: %s\nrun_uuid: %s\nstatus: 4\nstart_time: %d\nend_time: %d\nlifecycle_stage: active\n"
              % (failed, failed, T0, T0 + 60000))
        write(self.mlruns, "0/%s/tags/mlflow.runName" % failed, "crashy")
        write(self.mlruns, "0/%s/metrics/loss" % failed, "%d 1.0 0\ngarbage\n" % T0)
        return run, failed

    def test_store_becomes_runs_with_every_step_and_a_second_import_changes_nothing(self):
        run, failed = self.make_store()
        rc, out, err = self.run_import()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("2 runs", out)
        self.assertIn("loss:2: expected \"timestamp value [step]\"", err)  # the bad line, named

        r = self.get("/api/v1/runs/mlflow-" + run)
        self.assertEqual((r["project"], r["name"], r["status"]), ("bert-sweep", "lr-3e-4", "finished"))
        self.assertEqual(r["config"], {"lr": 0.0003, "optimizer": "adamw"})
        self.assertEqual(r["tags"], ["team=nlp"])
        self.assertEqual(r["git_commit"], "9b96403")
        self.assertAlmostEqual(r["start_time"], T0 / 1000.0)
        self.assertAlmostEqual(r["end_time"], (T0 + 3600000) / 1000.0)
        hist = {h["key"]: h for h in self.get("/api/v1/runs/mlflow-%s/history" % run)}
        self.assertEqual(sorted(hist), ["loss", "train/acc"])
        loss = hist["loss"]
        self.assertEqual(loss["steps"], list(range(3000)))
        want = [2.0 / (1 + s) for s in range(3000)]
        want[7] = "NaN"
        want[10] = 9.5
        self.assertEqual(loss["values"], want)
        self.assertEqual(loss["timestamps"][10], T0 + 5000000)
        self.assertEqual(loss["timestamps"][11], T0 + 11000)
        self.assertEqual(hist["train/acc"]["values"], [0.5, 0.75])

        f = self.get("/api/v1/runs/mlflow-" + failed)
        self.assertEqual((f["project"], f["name"], f["status"]), ("Default", "crashy", "failed"))
        self.assertAlmostEqual(f["end_time"], (T0 + 60000) / 1000.0)

        # Again: same runs, nothing stored twice.
        rc, out, err = self.run_import()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("(0 stored now", out)
        runs = self.get("/api/v1/runs?filter=" + urllib.parse.quote('id =~ "mlflow-.*"'))
        self.assertEqual(len(runs), 2)
        self.assertEqual(self.get("/api/v1/runs/mlflow-%s/history?keys=loss" % run)[0]["values"], want)
        by_filter = self.get("/api/v1/runs?filter=" + urllib.parse.quote("config.lr > 1e-4"))
        self.assertEqual([x["id"] for x in by_filter], ["mlflow-" + run])

    def test_not_a_store_is_a_clear_error(self):
        os.makedirs(self.mlruns)
        rc, out, err = self.run_import()
        self.assertEqual(rc, 1)
        self.assertIn("no MLflow experiment", err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: import_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
