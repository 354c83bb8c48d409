#!/usr/bin/env python3
"""Scrape benchmark: trainwatch and Debian's Prometheus 2.42 scrape the same
generated load (generator.py) side by side, with the same scrape config, in
the same run; reports CPU seconds per million scraped samples and RSS.

Usage: run.py /path/to/trainwatch [--targets 200] [--series 1000]
              [--interval 15] [--warmup 60] [--window 120]

CPU is user+system time of each server process (from /proc/PID/stat) over
the measurement window, after a warm-up in which every target was scraped.
Scraped samples in the window = targets x series x window / interval (both
servers scrape every target once per interval; the script checks that every
target is up on both before measuring).
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
import time
import urllib.parse
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())["data"]["result"]


def wait_http(port, path, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("port %d not ready" % port)


def stop_all(procs):
    """SIGTERM by PID, newest first; SIGKILL what is still running after 30 s."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trainwatch")
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--interval", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--window", type=int, default=120)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tw-scrape-bench-")
    procs = []
    try:
        gen_port, tw_port, prom_port = free_port(), free_port(), free_port()
        here = os.path.dirname(os.path.abspath(__file__))
        gen = subprocess.Popen([sys.executable, os.path.join(here, "generator.py"), str(gen_port), str(a.targets),
                                str(a.series)], stdout=subprocess.PIPE)
        procs.append(gen)
        gen.stdout.readline()
        groups = [{"targets": ["127.0.0.1:%d" % gen_port],
                   "labels": {"__metrics_path__": "/metrics/%d" % i, "target": str(i)}} for i in range(a.targets)]
        cfg = os.path.join(tmp, "scrape.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: %ds, scrape_timeout: 10s}\nscrape_configs:\n" % a.interval)
            f.write("  - " + json.dumps({"job_name": "bench", "static_configs": groups}) + "\n")
        tw = subprocess.Popen([a.trainwatch, "serve", "--data-dir", os.path.join(tmp, "tw"), "--listen",
                               "127.0.0.1:%d" % tw_port, "--config.file", cfg, "--scrape.self=false",
                               "--wal.sync", "interval", "--collect.host=false", "--collect.gpu=false",
                               "--rules.default-pack=false"],
                              stdout=open(os.path.join(tmp, "tw.log"), "w"), stderr=subprocess.STDOUT)
        procs.append(tw)
        prom = subprocess.Popen(["/usr/bin/prometheus", "--config.file=" + cfg,
                                 "--storage.tsdb.path=" + os.path.join(tmp, "prom"),
                                 "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"],
                                stdout=open(os.path.join(tmp, "prom.log"), "w"), stderr=subprocess.STDOUT)
        procs.append(prom)
        wait_http(tw_port, "/-/ready")
        wait_http(prom_port, "/-/ready")
        time.sleep(a.warmup)
        for name, port in (("trainwatch", tw_port), ("prometheus", prom_port)):
            up = query(port, 'sum(up{job="bench"})')
            n = float(up[0]["value"][1]) if up else 0
            if n != a.targets:
                raise RuntimeError("%s: %d of %d targets up after warm-up" % (name, n, a.targets))
        c0 = {p.pid: cpu_seconds(p.pid) for p in (tw, prom)}
        t0 = time.time()
        time.sleep(a.window)
        c1 = {p.pid: cpu_seconds(p.pid) for p in (tw, prom)}
        window = time.time() - t0
        samples = a.targets * a.series * window / a.interval
        res = {}
        for name, p in (("trainwatch", tw), ("prometheus", prom)):
            cpu = c1[p.pid] - c0[p.pid]
            res[name] = {"cpu_s": round(cpu, 2), "cpu_s_per_1M_samples": round(cpu / samples * 1e6, 3),
                         "rss_mib": round(rss_mib(p.pid), 1)}
        res["load"] = {"targets": a.targets, "series": a.series, "interval_s": a.interval,
                       "window_s": round(window, 1), "samples_scraped": int(samples)}
        res["ratio_cpu"] = round(res["trainwatch"]["cpu_s"] / max(res["prometheus"]["cpu_s"], 1e-9), 3)
        print(json.dumps(res, indent=1))
    finally:
        stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
