#!/usr/bin/env python3
"""Soak: a default `trainwatch serve` through months of simulated time.

Starts `serve` with every default on (host collector, training rule pack,
self-scrape, runs, logs) on a warped clock (--debug.clock-speed, base/clock.h)
and `trainwatch demo` on the same clock (one simulated 4-rank training run
after another), pushes a training job's log lines through the Loki push API,
and samples once per simulated hour: RSS, CPU, threads, open files, disk by
part (blocks, WAL, runs.db, log store), blocks by compaction level, the oldest
data kept, WAL segments and checkpoint. Writes the samples as JSON, checks the
long-run invariants, and prints a summary; plot.py draws the curves.

Usage:
  python3 bench/soak/run.py --binary build/release/src/app/trainwatch \
      --days 30 --speed 1440 --out /tmp/soak
  python3 bench/soak/plot.py /tmp/soak/soak.json docs/img/soak.png

Python 3 standard library only. Exit status 1 when an invariant fails.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    """The warped clock of base/clock.h: reads `start_ms` at real `origin_s`."""

    def __init__(self, start_ms, origin_s, speed):
        self.start_ms, self.origin_s, self.speed = start_ms, origin_s, speed

    def now_ms(self):
        return self.start_ms + int((time.time() - self.origin_s) * 1000 * self.speed)

    def flags(self):
        return ["--debug.clock-speed", str(self.speed), "--debug.clock-start", "%.3f" % (self.start_ms / 1000),
                "--debug.clock-origin", "%.3f" % self.origin_s]


def http(url, body=None, timeout=30):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass  # removed by compaction or retention while we walk
    return total


def read_proc(pid):
    with open("/proc/%d/status" % pid) as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "rss_bytes": int(status["VmRSS"].split()[0]) * 1024,
        "threads": int(status["Threads"]),
        "open_files": len(os.listdir("/proc/%d/fd" % pid)),
        "cpu_seconds": (int(fields[11]) + int(fields[12])) / ticks,
    }


def storage(data):
    """Disk by part, blocks by compaction level, the oldest data kept."""
    out = {"blocks": 0, "block_bytes": 0, "levels": {}, "oldest_block_ms": None, "wal_bytes": 0, "wal_segments": 0,
           "checkpoint": None, "runs_db_bytes": 0, "logs_bytes": 0, "log_partitions": 0, "oldest_log_partition": None}
    for name in os.listdir(data):
        path = os.path.join(data, name)
        if len(name) == 26 and os.path.isdir(path):
            try:
                with open(os.path.join(path, "meta.json")) as f:
                    meta = json.load(f)
            except (FileNotFoundError, ValueError):
                continue  # being written or deleted
            out["blocks"] += 1
            out["block_bytes"] += dir_bytes(path)
            lvl = str(meta["compaction"]["level"])
            out["levels"][lvl] = out["levels"].get(lvl, 0) + 1
            if out["oldest_block_ms"] is None or meta["minTime"] < out["oldest_block_ms"]:
                out["oldest_block_ms"] = meta["minTime"]
        elif name.startswith("checkpoint."):
            out["checkpoint"] = name
            out["wal_bytes"] += dir_bytes(path)
        elif name == "wal":
            segs = [s for s in os.listdir(path) if s.isdigit()]
            out["wal_segments"] = len(segs)
            out["wal_bytes"] += dir_bytes(path)
        elif name.startswith("runs.db"):
            out["runs_db_bytes"] += os.path.getsize(path)
        elif name == "logs":
            out["logs_bytes"] = dir_bytes(path)
            parts = sorted(p for p in os.listdir(path) if p.endswith(".db"))
            out["log_partitions"] = len(parts)
            out["oldest_log_partition"] = parts[0] if parts else None
    return out


def scrape_metrics(base):
    """The server's own gauges and counters this soak reads, by name (summed over labels)."""
    _, body = http(base + "/metrics")
    want = ("trainwatch_tsdb_head_series", "trainwatch_tsdb_head_samples", "trainwatch_tsdb_compactions_total",
            "trainwatch_tsdb_blocks_loaded", "trainwatch_tsdb_appended_samples_total",
            "trainwatch_tsdb_compaction_series_skipped_total")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in want:
            out[name] = out.get(name, 0) + float(line.rsplit(" ", 1)[1])
    return out


class LogPusher(threading.Thread):
    """A training job's stdout: `per_hour` lines per simulated hour, stamped
    with the warped clock, pushed through /loki/api/v1/push."""

    def __init__(self, base, clock, per_hour):
        super().__init__(daemon=True)
        self.base, self.clock, self.per_hour = base, clock, per_hour
        self.stop = threading.Event()
        self.pushed = self.refused = 0
        self.last_ms = clock.now_ms()
        self.step = 0

    def run(self):
        while not self.stop.wait(0.2):
            now = self.clock.now_ms()
            n = int((now - self.last_ms) * self.per_hour / HOUR_MS)
            if n <= 0:
                continue
            values = []
            for i in range(n):
                t = self.last_ms + (now - self.last_ms) * (i + 1) // n
                self.step += 1
                level = "warning" if self.step % 97 == 0 else "info"
                values.append([str(t * 1000000), "%s step=%d loss=%.4f lr=3.0e-04 tokens/s=51234" %
                               (level.upper(), self.step, 2.0 / (1 + self.step / 5000))])
            body = json.dumps({"streams": [{"stream": {"job": "soak-train", "host": "soak-node-0", "rank": "0"},
                                            "values": values}]}).encode()
            try:
                status, _ = http(self.base + "/loki/api/v1/push", body)
                ok = 200 <= status < 300
            except Exception:  # refused (4xx/5xx raise) or a restart in progress
                ok = False
            if ok:
                self.pushed += n
                self.last_ms = now
            else:
                self.refused += 1


def slope_and_spread(points):
    """(relative change per day by least squares, max/min) of (day, value) points."""
    n = len(points)
    if n < 2:
        return 0.0, 1.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    slope = sxy / sxx if sxx else 0.0
    lo, hi = min(p[1] for p in points), max(p[1] for p in points)
    return (slope / my if my else 0.0), (hi / lo if lo else float("inf"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/release/src/app/trainwatch")
    ap.add_argument("--days", type=float, default=30, help="simulated days (default 30)")
    ap.add_argument("--speed", type=float, default=1440, help="simulated seconds per real second (default 1440)")
    ap.add_argument("--start-days-ago", type=float, default=31,
                    help="the simulated clock starts this many days before now (default 31)")
    ap.add_argument("--log-lines-per-hour", type=int, default=3600, help="pushed log lines per simulated hour")
    ap.add_argument("--demo-steps", type=int, default=3000, help="steps of each demo run")
    ap.add_argument("--demo-rate", type=float, default=20, help="demo steps per real second")
    ap.add_argument("--out", required=True, help="directory for soak.json and the servers' logs")
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra serve flag (repeatable)")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tw-soak-")
    data = os.path.join(work, "data")
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    origin_s = time.time() + 1
    clock = Clock(int((origin_s - args.start_days_ago * 86400) * 1000), origin_s, args.speed)
    serve_cmd = [args.binary, "serve", "--listen", "127.0.0.1:%d" % port, "--data-dir", data] + clock.flags() + \
        args.serve_arg
    serve_log = open(os.path.join(args.out, "serve.log"), "w")
    demo_log = open(os.path.join(args.out, "demo.log"), "w")
    serve = subprocess.Popen(serve_cmd, stdout=serve_log, stderr=subprocess.STDOUT)
    demo = pusher = None
    samples = []
    runs = None
    try:
        deadline = time.time() + 60
        while True:
            try:
                if http(base + "/-/ready", timeout=2)[0] == 200:
                    break
            except Exception:
                pass
            if serve.poll() is not None or time.time() > deadline:
                raise SystemExit("serve did not get ready; see " + serve_log.name)
            time.sleep(0.1)
        demo = subprocess.Popen([args.binary, "demo", "--url", base, "--steps", str(args.demo_steps), "--rate",
                                 str(args.demo_rate), "--pause", "2", "--spool-dir", os.path.join(work, "spool")] +
                                clock.flags(), stdout=demo_log, stderr=subprocess.STDOUT)
        pusher = LogPusher(base, clock, args.log_lines_per_hour)
        pusher.start()
        t0_ms = clock.now_ms()
        end_ms = t0_ms + int(args.days * DAY_MS)
        next_ms = t0_ms
        print("soak: serve pid %d on %s, %.0f simulated days at %gx (about %.0f real minutes)" %
              (serve.pid, base, args.days, args.speed, args.days * 86400 / args.speed / 60), flush=True)
        while True:
            now = clock.now_ms()
            if now < next_ms:
                time.sleep(min(1.0, (next_ms - now) / args.speed / 1000))
                continue
            if serve.poll() is not None:
                raise SystemExit("serve exited with %s; see %s" % (serve.returncode, serve_log.name))
            s = {"sim_ms": now, "day": (now - t0_ms) / DAY_MS}
            s.update(read_proc(serve.pid))
            s.update(storage(data))
            s.update(scrape_metrics(base))
            s["log_lines_pushed"] = pusher.pushed
            s["log_pushes_refused"] = pusher.refused
            samples.append(s)
            if len(samples) % 24 == 1:
                print("soak: day %5.1f rss %4.0f MiB, disk %5.0f MiB, %d blocks %s, wal %d segs, %d log partitions, "
                      "%d fds, %d threads" % (s["day"], s["rss_bytes"] / 2**20,
                                              (s["block_bytes"] + s["wal_bytes"] + s["runs_db_bytes"] +
                                               s["logs_bytes"]) / 2**20, s["blocks"], s["levels"],
                                              s["wal_segments"], s["log_partitions"], s["open_files"], s["threads"]),
                      flush=True)
            if now >= end_ms:
                break
            next_ms += HOUR_MS
        _, body = http(base + "/api/v1/runs?limit=100000")
        runs = len(json.loads(body)["data"])
    finally:
        if pusher:
            pusher.stop.set()
        if demo and demo.poll() is None:
            demo.send_signal(signal.SIGTERM)
            try:
                demo.wait(timeout=30)
            except subprocess.TimeoutExpired:
                demo.kill()
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                serve.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("soak: data dir kept at", data)

    # The invariants.
    with open(os.path.join(args.out, "serve.log")) as f:
        log = f.read()
    cuts = log.count("persisted head up to")
    compactions = log.count("compacted ")
    errors = [l for l in log.splitlines() if "level=error" in l]
    retention_days = 15
    second_half = [s for s in samples if s["day"] >= retention_days + 1]
    checks = []

    def check(name, ok, detail):
        # None: not enough simulated days for this check.
        checks.append({"check": name, "ok": ok if ok is None else bool(ok), "detail": detail})

    hours = (samples[-1]["sim_ms"] - samples[0]["sim_ms"]) / HOUR_MS
    check("a block cut every 2 h", cuts >= hours / 2 - 2, "%d head cuts in %.0f simulated hours" % (cuts, hours))
    levels = {int(k) for s in samples for k in s["levels"]}
    check("compaction merges levels", max(levels) >= 3, "levels seen: %s, %d compactions" % (sorted(levels), compactions))
    oldest = (samples[-1]["sim_ms"] - samples[-1]["oldest_block_ms"]) / DAY_MS
    check("retention deletes blocks", oldest <= retention_days + 2, "oldest block starts %.1f days back" % oldest)
    check("retention deletes log partitions", samples[-1]["log_partitions"] <= retention_days + 2,
          "%d log partitions at the end (max %d)" % (samples[-1]["log_partitions"],
                                                     max(s["log_partitions"] for s in samples)))
    check("the WAL is checkpointed and truncated", max(s["wal_segments"] for s in samples) <= 8,
          "at most %d WAL segments; last checkpoint %s" % (max(s["wal_segments"] for s in samples),
                                                           samples[-1]["checkpoint"]))
    check("no series skipped by compaction", samples[-1].get("trainwatch_tsdb_compaction_series_skipped_total", 0) == 0,
          "trainwatch_tsdb_compaction_series_skipped_total %g" %
          samples[-1].get("trainwatch_tsdb_compaction_series_skipped_total", 0))
    crashed = log.count("crashed: no heartbeat")
    check("no live run marked crashed", crashed == 0, "%d runs marked crashed (the demo heartbeats on the warped "
                                                       "clock)" % crashed)
    check("no error logged", not errors, "%d error lines%s" % (len(errors), (": " + errors[0][:300]) if errors else ""))
    flat = {}
    enough = len(second_half) >= 48
    for key, limit in (("rss_bytes", 0.02), ("open_files", 0.02), ("threads", 0.0), ("block_bytes", 0.02),
                       ("logs_bytes", 0.02), ("wal_bytes", 0.05)):
        rel, spread = slope_and_spread([(s["day"], s[key]) for s in second_half])
        flat[key] = {"change_per_day": rel, "max_over_min": spread}
        check("%s flat after retention" % key, (abs(rel) <= limit or spread <= 1.10) if enough else None,
              "%+.2f%% per day, max/min %.2f over days %d-%d" % (rel * 100, spread, retention_days + 1, args.days))
    summary = {"command": " ".join(sys.argv), "serve": " ".join(serve_cmd[1:]), "speed": args.speed,
               "days": args.days, "samples": len(samples), "head_cuts": cuts, "compactions": compactions,
               "log_lines_pushed": pusher.pushed if pusher else 0, "runs": runs,
               "runs_db_bytes_per_run": samples[-1]["runs_db_bytes"] / runs if runs else None, "checks": checks, "flat": flat,
               "cpu_seconds": samples[-1]["cpu_seconds"], "real_seconds": (samples[-1]["sim_ms"] - samples[0]["sim_ms"])
               / 1000 / args.speed}
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump({"summary": summary, "samples": samples}, f, indent=1)
    for c in checks:
        print("soak: %s %s: %s" % ({True: "PASS", False: "FAIL", None: "SKIP"}[c["ok"]], c["check"], c["detail"]))
    print("soak: %s runs, runs.db %.1f KiB per run, %d log lines pushed, %.0f CPU seconds in %.0f real seconds" %
          (runs, summary["runs_db_bytes_per_run"] / 1024 if runs else 0, summary["log_lines_pushed"],
           summary["cpu_seconds"], summary["real_seconds"]))
    return 0 if all(c["ok"] is not False for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
