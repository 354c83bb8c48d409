#!/usr/bin/env python3
"""A live demo training job for `make run`: pushes the metrics of a simulated
training run to trainwatch every second, so a fresh server shows real data.

Names follow docs/training-metrics.md. The run's loss follows a noisy power
law towards a floor, the learning rate a warm-up + cosine schedule; throughput
wobbles around a mean. On first start it also writes one finished earlier run
("baseline", the last two hours) to compare against.

Standard library only. Usage: training_job.py [--url URL] [--steps N] [--rate STEPS_PER_SEC]
"""
import argparse
import json
import math
import random
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PROJECT = "demo"


def push(url, lines):
    body = ("\n".join(lines) + "\n").encode()
    req = urllib.request.Request(url + "/api/v1/import/prometheus", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        if resp.status != 204:
            raise RuntimeError(f"import answered {resp.status}")


def query(url, expr):
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as resp:
        return json.load(resp)["data"]["result"]


class Run:
    """A simulated run: the metric values at a step, deterministic per seed."""

    def __init__(self, name, total_steps, seed, base_loss=2.6, floor=0.35):
        self.name = name
        self.total = total_steps
        self.rng = random.Random(seed)
        self.base_loss = base_loss
        self.floor = floor

    def lr(self, step):
        warmup = max(1, self.total // 50)
        if step < warmup:
            return 3e-4 * step / warmup
        p = (step - warmup) / max(1, self.total - warmup)
        return 3e-4 * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))

    def values(self, step):
        loss = self.floor + (self.base_loss - self.floor) * (1 + step / 400) ** -0.7
        loss *= math.exp(self.rng.gauss(0, 0.03))
        grad = 1.5 * (1 + step / 800) ** -0.3 * math.exp(self.rng.gauss(0, 0.15))
        sps = 1850 + self.rng.gauss(0, 40)
        return {
            "loss": loss,
            "lr": self.lr(step),
            "grad_norm": grad,
            "samples_per_sec": sps,
            "step_time_seconds": 256 / sps,
        }

    def lines(self, step, ts_ms, active):
        labels = f'project="{PROJECT}",run="{self.name}"'
        out = [f"{k}{{{labels}}} {v!r} {ts_ms}" for k, v in self.values(step).items()]
        out.append(f"trainwatch_run_step{{{labels}}} {step} {ts_ms}")
        out.append(f"trainwatch_run_total_steps{{{labels}}} {self.total} {ts_ms}")
        out.append(f"trainwatch_run_heartbeat_timestamp_seconds{{{labels}}} {ts_ms / 1000!r} {ts_ms}")
        out.append(f"trainwatch_run_active{{{labels}}} {1 if active else 0} {ts_ms}")
        return out


def backfill_baseline(url, now_ms):
    """One finished run over the two hours before now, pushed once."""
    if query(url, f'count_over_time(trainwatch_run_step{{project="{PROJECT}",run="baseline"}}[30d])'):
        return
    run = Run("baseline", 7200, seed=1, base_loss=2.7, floor=0.42)
    start = now_ms - 2 * 3600 * 1000
    lines = [f'trainwatch_run_start_timestamp_seconds{{project="{PROJECT}",run="baseline"}} {start / 1000!r} {start}']
    for step in range(0, run.total + 1, 10):
        ts = start + step * 1000
        lines += run.lines(step, ts, active=step < run.total)
    push(url, lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:9800")
    ap.add_argument("--steps", type=int, default=36000, help="total steps of the live run")
    ap.add_argument("--rate", type=float, default=10, help="steps per second")
    args = ap.parse_args()

    for _ in range(100):
        try:
            urllib.request.urlopen(args.url + "/-/ready", timeout=2).close()
            break
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)

    backfill_baseline(args.url, int(time.time() * 1000))
    while True:  # one run after another, so the demo stays live
        run_once(args)
        time.sleep(10)


def run_once(args):
    now = int(time.time() * 1000)
    name = time.strftime("live-%Y%m%d-%H%M%S", time.gmtime())
    run = Run(name, args.steps, seed=now)
    labels = f'project="{PROJECT}",run="{name}"'
    push(args.url, [f"trainwatch_run_start_timestamp_seconds{{{labels}}} {now / 1000!r} {now}"])
    print(f"demo job: run {PROJECT}/{name}, {args.steps} steps at {args.rate}/s, pushing to {args.url}",
          flush=True)

    step, last_ts = 0, 0
    t_start = time.monotonic()
    while step < run.total:
        time.sleep(1)
        target = min(run.total, int((time.monotonic() - t_start) * args.rate))
        lines = []
        # One point per logged step, timestamps strictly increasing within the second.
        now = int(time.time() * 1000)
        n = max(1, target - step)
        first = step
        for i in range(n):
            ts = max(last_ts + 1, now - (n - 1 - i))
            last_ts = ts
            step = min(run.total, step + 1)
            lines += run.lines(step, ts, active=step < run.total)
        try:
            push(args.url, lines)
        except (urllib.error.URLError, OSError, RuntimeError) as e:
            print(f"demo job: push failed ({e}); retrying next second", file=sys.stderr, flush=True)
            step = first  # resend these steps: nothing acknowledged was stored
    print(f"demo job: run {name} finished", flush=True)


if __name__ == "__main__":
    main()
