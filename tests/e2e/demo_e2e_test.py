#!/usr/bin/env python3
"""End-to-end test of `trainwatch demo` (what `make run` starts): simulated
training runs with 4 ranks driven through the header-only C++ client
against the real server, which is killed and restarted mid-run. Checks every
step of every rank present exactly once, the loss spike, the learning-rate
schedule, the straggler rank, ETA while running, the rich values (histograms,
images, text, a table), and the baseline run.

Usage: demo_e2e_test.py /path/to/trainwatch [unittest args]
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

STEPS = 900
RANKS = 4
FAKE_NVML = None


class DemoTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-demo-e2e-")
        self.server = None
        self.demo = None

    def tearDown(self):
        if self.demo:
            self.demo.stop()
        if self.server:
            self.server.stop_quietly()
        os.environ.pop("FAKE_NVML_CONFIG", None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body[:500])
        return json.loads(body)["data"]

    def runs(self, flt):
        return self.get("/api/v1/runs?filter=" + urllib.parse.quote(flt))

    def metrics(self, run_id, key):
        """{rank: [(step, value)]} of one key of a run, by step."""
        out = {}
        for s in self.get("/api/v1/runs/metrics?x=step&points=100000&ids=%s&keys=%s" % (run_id, key)):
            self.assertEqual(s["total_points"], len(s["points"]))
            out[int(s["labels"]["rank"])] = [(p["x"], p["last"]) for p in s["points"]]
        return out

    def test_demo_runs_through_a_server_restart(self):
        port = twtest.free_port()
        # As make run without a GPU: the demo keeps the fake NVML library's file,
        # which the server's real GPU collector reads.
        gpus = os.path.join(self.tmp, "gpus.txt")
        os.environ["FAKE_NVML_CONFIG"] = gpus
        url = "http://127.0.0.1:%d" % port
        self.demo = Process([twtest.BINARY, "demo", "--url", url, "--rate", "150", "--steps", str(STEPS), "--runs", "2",
                             "--pause", "0.5", "--spool-dir", os.path.join(self.tmp, "spool"), "--fake-gpus", gpus],
                            os.path.join(self.tmp, "demo.log"))
        deadline = time.time() + 10
        while not os.path.exists(gpus) and time.time() < deadline:
            time.sleep(0.05)
        self.server = Server(os.path.join(self.tmp, "data"),
                             ["--runs.heartbeat-timeout", "1h", "--logs.metrics-interval", "1s", "--collect.host=false",
                              "--collect.interval", "1s", "--collect.nvml-path", FAKE_NVML,
                              "--runs.gpu-hour-price", "H100=3.6"],
                             port=port, collect=True).start()
        # The first live run gets going; its ETA is reported while it runs.
        deadline = time.time() + 120
        eta = None
        while time.time() < deadline:
            self.assertIsNone(self.demo.proc.poll(), self.demo.logs())
            live = self.runs('project = "demo" and name =~ "live-.*" and status = "running"')
            if live and (live[0]["step"] or 0) >= 50 and live[0]["eta_seconds"] is not None:
                eta = live[0]["eta_seconds"]
            if live and (live[0]["step"] or 0) >= STEPS // 3 and eta is not None:
                break
            time.sleep(0.1)
        else:
            self.fail("the live run never got going: " + self.demo.logs())
        self.assertGreater(eta, 0)
        self.server.kill9()
        time.sleep(1.5)  # the demo keeps logging; the client spools
        self.server.start()
        self.assertEqual(self.demo.proc.wait(timeout=120), 0, self.demo.logs())

        base = self.get("/api/v1/runs/demo-baseline")
        self.assertEqual((base["name"], base["status"], base["step"]), ("baseline", "finished", STEPS - 1))
        live = self.runs('project = "demo" and name =~ "live-.*"')
        self.assertEqual(len(live), 2, live)
        for run in live + [base]:
            self.assertEqual(run["status"], "finished", run)
            self.assertEqual(run["world_size"], RANKS)
            self.assertEqual(run["config"]["optimizer"]["name"], "adamw")
            self.assertEqual(run["tags"], ["demo", "simulated"])
            self.assertEqual(run["total_steps"], STEPS)
            loss = self.metrics(run["id"], "loss")
            self.assertEqual(sorted(loss), list(range(RANKS)))
            for rank, pts in loss.items():
                self.assertEqual([x for x, _ in pts], list(range(STEPS)), (run["name"], rank))
            # The loss falls, with a spike at 60% of the run.
            l0 = dict(loss[0])
            spike = int(STEPS * 3 / 5)
            self.assertLess(l0[STEPS - 1], l0[0] / 2)
            self.assertGreater(l0[spike], 1.8 * l0[spike - 5])
            # Warm-up, then cosine down to 10% of the peak.
            lr = dict(self.metrics(run["id"], "lr")[0])
            warm = STEPS // 50
            self.assertLess(lr[0], lr[warm - 1])
            self.assertAlmostEqual(lr[warm], 3e-4)
            self.assertAlmostEqual(lr[STEPS - 1], 3e-5, delta=1e-6)
            # Rank 3 is the straggler.
            sps = self.metrics(run["id"], "samples_per_sec")
            mean = {r: sum(v for _, v in p) / len(p) for r, p in sps.items()}
            self.assertLess(mean[3], min(mean[0], mean[1], mean[2]))
            for key in ("grad_norm", "step_time_seconds"):
                self.assertEqual(sorted(self.metrics(run["id"], key)), list(range(RANKS)))
        # Rich values from rank 0 every STEPS // 40 steps and at the last: weight and
        # gradient histograms, a sample image (a PNG), generated text, an eval table.
        media_steps = sorted(set(range(0, STEPS, STEPS // 40)) | {STEPS - 1})
        kinds = {"weights/fc1": "histogram", "gradients/fc1": "histogram", "samples/generated": "image",
                 "samples/text": "text", "eval/predictions": "table"}
        for run in live + [base]:
            keys = self.get("/api/v1/runs/media/keys?ids=" + run["id"])
            self.assertEqual({k["key"]: k["kind"] for k in keys}, kinds, keys)
            for k in keys:
                self.assertEqual((k["steps"], k["first_step"], k["last_step"]), (len(media_steps), 0, STEPS - 1), k)
            hist = self.get("/api/v1/runs/histograms?points=1000&key=weights/fc1&ids=" + run["id"])
            self.assertEqual([h["step"] for h in hist], media_steps)
            self.assertTrue(all(h["rank"] == 0 and sum(b[2] for b in h["buckets"]) == 4096 for h in hist))
            table = self.get("/api/v1/runs/media?key=eval/predictions&step=%d&ids=%s" % (STEPS - 1, run["id"]))
            self.assertEqual(table[0]["columns"], ["input", "label", "prediction", "confidence", "correct"])
            self.assertEqual(len(table[0]["rows"]), 8)
            img = self.get("/api/v1/runs/media?key=samples/generated&step=%d&ids=%s" % (STEPS // 2, run["id"]))[0]
            self.assertEqual((img["format"], img["width"], img["height"]), ("png", 64, 64), img)
            status, body = self.server.request("GET", img["url"])
            self.assertEqual(status, 200)
            self.assertTrue(body.startswith(b"\x89PNG"), body[:16])
        for run in live:
            full = self.get("/api/v1/runs/" + run["id"])
            self.assertEqual([a["title"] for a in full["alerts"]], ["demo checkpoint"])
            self.assertIn("final_loss", full["summary"])
            # What the simulated script prints: progress lines from rank 0 and, from
            # rank 2, a CUDA error that the log metrics count for TrainingLogFailure.
            q = urllib.parse.quote('{project="demo", run="%s"}' % run["name"])
            lines = self.get("/api/v1/logs/query?limit=1000&query=" + q)["lines"]
            progress = [l for l in lines if l["message"].startswith("step ")]
            self.assertEqual(len(progress), STEPS // (STEPS // 100), [l["message"] for l in lines][:5])
            self.assertTrue(all(l["labels"]["rank"] == "0" for l in progress))
            cuda = [l for l in lines if "CUDA error" in l["message"]]
            self.assertEqual(len(cuda), 1, [l["message"] for l in lines if not l["message"].startswith("step ")])
            self.assertEqual((cuda[0]["level"], cuda[0]["labels"]["rank"]), ("ERROR", "2"))
        # The simulated GPUs, one per rank, through the real collector: each live run
        # held them (its GPU time, energy and cost); the baseline ran at full speed
        # without them.
        util = self.get("/api/v1/query?query=" + urllib.parse.quote('DCGM_FI_DEV_GPU_UTIL{job="dcgm"}'))["result"]
        self.assertEqual(sorted(r["metric"]["gpu"] for r in util), ["0", "1", "2", "3"])
        for run in live:
            gpu = self.get("/api/v1/runs/" + run["id"])["gpu"]
            self.assertGreater(gpu["hours"], 0, run["name"])
            self.assertGreater(gpu["energy_kwh"], 0, run["name"])
            self.assertAlmostEqual(gpu["cost"], gpu["hours"] * 3.6, delta=1e-9)
        self.assertEqual(base["gpu"]["hours"], 0)
        # Counted per run for TrainingLogFailure (written every --logs.metrics-interval).
        q = urllib.parse.quote('max by (run) (max_over_time(trainwatch_log_pattern_matches_total'
                               '{project="demo",pattern="cuda_error"}[1h]))')
        deadline = time.time() + 30
        while len(self.get("/api/v1/query?query=" + q)["result"]) < 3 and time.time() < deadline:
            time.sleep(0.5)
        self.assertEqual(len(self.get("/api/v1/query?query=" + q)["result"]), 3)
        # The run series the server writes for rules and dashboards.
        q = urllib.parse.quote('max_over_time(trainwatch_run_progress_ratio{project="demo"}[1h])')
        prog = self.get("/api/v1/query?query=" + q)["result"]
        self.assertEqual(len(prog), 3)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: demo_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    FAKE_NVML = os.path.abspath(sys.argv.pop(1))
    unittest.main()
