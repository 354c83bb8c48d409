#!/usr/bin/env python3
"""End-to-end test: a small real PyTorch model trained on CPU (Debian's
python3-torch, /usr/bin/python3) for a few hundred steps with the Python
client and trainwatch.torch.watch(); the server is killed mid-run and
restarted. Checks the config stored, every logged step present exactly
once, the watch() metrics, stdout captured, status finished, the ETA
reported while the run was going, and watch()'s native histogram
train_step_duration_seconds (remote write): one observation per step after
the first, in the buckets of the step times the script measured itself.

Usage: torch_e2e_test.py /path/to/trainwatch [unittest args]
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

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENT = os.path.join(ROOT, "clients", "python")
STEPS = 400

TRAIN = r'''
import json, sys, time
sys.path.insert(0, %(client)r)
import torch
import trainwatch, trainwatch.torch

torch.manual_seed(0)
torch.set_num_threads(1)
config = {"lr": 0.05, "hidden": 32, "batch_size": 64, "optimizer": "sgd"}
run = trainwatch.init(project="torch-e2e", name="mlp", config=config, total_steps=%(steps)d,
                      tags=["e2e", "torch"], flush_interval=0.05, timeout=2)
print("run-id", run.id, flush=True)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
w = trainwatch.torch.watch(model, opt, every=10)
w_true = torch.randn(8, 1)
step_starts = []  # when each opt.step() was called, as watch() times it
for step in range(%(steps)d):
    x = torch.randn(64, 8)
    y = x @ w_true + 0.1 * torch.randn(64, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    step_starts.append(time.perf_counter())
    opt.step()
    sched.step()
    run.log({"loss": loss.item(), "train/mse": loss}, step=step)
    if step %% 50 == 0:
        print("step %%d loss %%.4f" %% (step, loss.item()), flush=True)
    time.sleep(0.015)
run.summary["final_loss"] = loss.item()
count, total, zero, buckets = w.step_durations.snapshot()
with open(%(hist_out)r, "w") as f:  # what the client counted, and the step times measured here
    json.dump({"count": count, "sum": total, "zero": zero, "buckets": buckets,
               "measured": [b - a for a, b in zip(step_starts, step_starts[1:])]}, f)
# What PyTorch prints on a GPU fault, and what logging's default handler writes, both to stderr.
print("RuntimeError: CUDA error: an illegal memory access was encountered (simulated)", file=sys.stderr, flush=True)
print("INFO:root:checkpoint saved", file=sys.stderr, flush=True)
print("training done", flush=True)
'''


def torch_available():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


class TorchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-torch-e2e-")
        self.server = None
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.server:
            self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get(self, path, want=200):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, want, body[:500])
        return json.loads(body)["data"]

    @unittest.skipUnless(torch_available(), "python3-torch is not installed for " + sys.executable)
    def test_train_mlp_with_server_restart(self):
        port = twtest.free_port()
        self.server = Server(os.path.join(self.tmp, "data"), ["--runs.heartbeat-timeout", "1h"], port=port).start()
        script = os.path.join(self.tmp, "train.py")
        hist_out = os.path.join(self.tmp, "step_hist.json")
        with open(script, "w") as f:
            f.write(TRAIN % {"client": CLIENT, "steps": STEPS, "hist_out": hist_out})
        env = dict(os.environ, TRAINWATCH_URL="http://127.0.0.1:%d" % port,
                   TRAINWATCH_SPOOL=os.path.join(self.tmp, "spool"))
        out_path = os.path.join(self.tmp, "train.out")
        with open(out_path, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, script], env=env, stdout=out, stderr=subprocess.STDOUT)

        def output():
            with open(out_path, "rb") as f:
                return f.read().decode("utf-8", "replace")

        # Wait for the run to be a third of the way, checking its ETA on the way.
        deadline = time.time() + 120
        run_id, eta, eta_series = None, None, None
        while time.time() < deadline:
            self.assertIsNone(self.proc.poll(), output())
            if run_id is None and "run-id" in output():
                run_id = output().split("run-id", 1)[1].split()[0]
            if run_id:
                st, body = self.server.request("GET", "/api/v1/runs/" + run_id)
                if st == 200:
                    info = json.loads(body)["data"]
                    if info["eta_seconds"] is not None and (info["step"] or 0) > 10:
                        eta = info["eta_seconds"]
                        q = urllib.parse.quote('trainwatch_run_eta_seconds{project="torch-e2e",run="mlp"}')
                        res = self.get("/api/v1/query?query=" + q)["result"]
                        if res:
                            eta_series = float(res[0]["value"][1])
                    if (info["step"] or 0) >= STEPS // 3 and eta_series is not None:
                        break
            time.sleep(0.1)
        else:
            self.fail("the run never got a third of the way: " + output())
        self.assertGreater(eta, 0)
        self.assertGreater(eta_series, 0)

        self.server.kill9()
        time.sleep(1.0)  # the script trains on, spooling
        self.server.start()
        self.assertEqual(self.proc.wait(timeout=180), 0, output())
        self.assertIn("training done", output())
        self.assertIn("step 350 loss", output())  # the terminal output is unchanged

        info = self.get("/api/v1/runs/" + run_id)
        self.assertEqual(info["status"], "finished")
        self.assertEqual(info["config"], {"lr": 0.05, "hidden": 32, "batch_size": 64, "optimizer": "sgd"})
        self.assertEqual(info["tags"], ["e2e", "torch"])
        self.assertEqual(info["step"], STEPS - 1)
        self.assertIn("final_loss", info["summary"])
        for key in ("loss", "train/mse"):
            m = self.get("/api/v1/runs/metrics?ids=%s&keys=%s&x=step&points=100000"
                         % (run_id, urllib.parse.quote(key)))
            self.assertEqual(len(m), 1, m)
            self.assertEqual(m[0]["total_points"], STEPS, key)
            self.assertEqual([p["x"] for p in m[0]["points"]], list(range(STEPS)), key)
        # watch(): every 10 optimizer steps after the first window.
        for key in ("grad_norm", "param_norm", "lr", "samples_per_sec", "step_time_seconds"):
            m = self.get("/api/v1/runs/metrics?ids=%s&keys=%s&x=step&points=100000" % (run_id, key))
            self.assertEqual([p["x"] for p in m[0]["points"]], list(range(10, STEPS, 10)), key)
        lr = {p["x"]: p["last"] for p in self.get(
            "/api/v1/runs/metrics?ids=%s&keys=lr&x=step&points=100000" % run_id)[0]["points"]}
        self.assertAlmostEqual(lr[50], 0.05)
        self.assertAlmostEqual(lr[150], 0.025)  # StepLR halved it
        sps = self.get("/api/v1/runs/metrics?ids=%s&keys=samples_per_sec&x=step&points=100000" % run_id)[0]
        self.assertTrue(all(0 < p["last"] < 64 / 0.015 for p in sps["points"]), sps)
        # watch()'s step phases, timed by its hooks: they add up to the step
        # time, and the loop's 15 ms sleep after each step is data time.
        phases = {}
        for key in ("step_phase/forward", "step_phase/backward", "step_phase/optimizer", "step_phase/data"):
            m = self.get("/api/v1/runs/metrics?ids=%s&keys=%s&x=step&points=100000"
                         % (run_id, urllib.parse.quote(key)))
            self.assertEqual(len(m), 1, (key, m))
            self.assertEqual(m[0]["metric"], "trainwatch_step_phase_seconds")
            phases[key] = {p["x"]: p["last"] for p in m[0]["points"]}
            self.assertEqual(sorted(phases[key]), list(range(10, STEPS, 10)), key)
            self.assertTrue(all(v > 0 for v in phases[key].values()), (key, phases[key]))
        # (The first window also counts step 0, which has no data phase before it.)
        self.assertTrue(all(v >= 0.015 for x, v in phases["step_phase/data"].items() if x >= 20),
                        phases["step_phase/data"])
        step_time = {p["x"]: p["last"] for p in self.get(
            "/api/v1/runs/metrics?ids=%s&keys=step_time_seconds&x=step&points=100000" % run_id)[0]["points"]}
        for x in range(20, STEPS, 10):  # the first window has no data phase before step 0
            total = sum(phases[k][x] for k in phases)
            self.assertGreater(total, 0.8 * step_time[x], (x, total, step_time[x]))
            self.assertLess(total, 1.25 * step_time[x], (x, total, step_time[x]))
        series = self.server.export('trainwatch_step_phase_seconds{run="mlp"}')
        self.assertEqual(sorted(dict(k)["phase"] for k in series), ["backward", "data", "forward", "optimizer"])
        self.check_step_histogram(run_id, hist_out, output)

        st, _ = self.server.request("GET", "/api/v1/logs/query?query=" + urllib.parse.quote('{run="mlp"}'))
        if st != 200:
            print("logs endpoint absent (%d): stdout capture assertion skipped" % st, file=sys.stderr)
            return
        q = urllib.parse.quote('{project="torch-e2e", run="mlp"}')
        lines = [l["message"] for l in self.get("/api/v1/logs/query?limit=1000&query=" + q)["lines"]]
        for s in range(0, STEPS, 50):
            self.assertTrue(any(l.startswith("step %d loss" % s) for l in lines), (s, lines))
        self.assertIn("training done", lines)
        # Captured lines carry no level: the server reads it from each line.
        levels = {l["message"]: l["level"] for l in self.get("/api/v1/logs/query?limit=1000&query=" + q)["lines"]}
        self.assertEqual(levels["RuntimeError: CUDA error: an illegal memory access was encountered (simulated)"],
                         "ERROR")
        self.assertEqual(levels["INFO:root:checkpoint saved"], "INFO")
        self.assertEqual(levels["training done"], "")

    def query(self, q):
        return self.get("/api/v1/query?query=" + urllib.parse.quote(q))["result"]

    def check_step_histogram(self, run_id, hist_out, output):
        """watch()'s train_step_duration_seconds, sent through /api/v1/write
        every 10 steps (some while the server was down) and at finish: the
        server holds the last state, one observation per step after the first."""
        with open(hist_out) as f:
            client = json.load(f)
        measured = client["measured"]
        self.assertEqual(len(measured), STEPS - 1)
        self.assertEqual(client["count"], STEPS - 1)
        sel = 'train_step_duration_seconds{job="trainwatch",run="%s",rank="0"}' % run_id
        res = self.query("histogram_count(%s)" % sel)
        self.assertEqual(len(res), 1, (res, output()))
        self.assertEqual(float(res[0]["value"][1]), STEPS - 1)
        res = self.query(sel)
        self.assertEqual(len(res), 1, res)
        self.assertEqual(res[0]["metric"], {"__name__": "train_step_duration_seconds", "job": "trainwatch",
                                            "run": run_id, "rank": "0"})
        hist = res[0]["histogram"][1]
        self.assertEqual(float(hist["count"]), STEPS - 1)
        self.assertAlmostEqual(float(hist["sum"]), client["sum"], delta=1e-9 * STEPS)
        # The same time as the script measured (it took its times a few µs before watch()'s).
        self.assertAlmostEqual(float(hist["sum"]), sum(measured), delta=0.002 + 0.001 * sum(measured))
        # Bucket by bucket: schema 3, (2^((i-1)/8), 2^(i/8)], the client's counts.
        server = {}
        for rule, lo, hi, n in hist["buckets"]:
            i = round(math.log2(float(hi)) * 8)
            self.assertAlmostEqual(float(lo), 2 ** ((i - 1) / 8), delta=1e-12)
            self.assertAlmostEqual(float(hi), 2 ** (i / 8), delta=1e-12)
            self.assertEqual(rule, 0)  # open left, closed right: (lo, hi]
            server[i] = float(n)
        self.assertEqual(server, {int(i): float(n) for i, n in client["buckets"].items()})
        self.assertEqual(sum(server.values()), STEPS - 1)
        # Every step time measured falls in a non-empty bucket (or one next to it: a time
        # within a few µs of a bound), and every step slept 15 ms.
        for v in measured:
            i = math.ceil(math.log2(v) * 8)
            self.assertTrue(any(j in server for j in (i - 1, i, i + 1)), (v, i, sorted(server)))
        self.assertGreaterEqual(min(server), math.ceil(math.log2(0.015) * 8), sorted(server))
        med = float(self.query("histogram_quantile(0.5, %s)" % sel)[0]["value"][1])
        self.assertGreater(med, sorted(measured)[len(measured) // 2] / 1.1)
        self.assertLess(med, sorted(measured)[len(measured) // 2] * 1.1)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: torch_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
