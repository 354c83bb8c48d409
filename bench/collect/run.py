#!/usr/bin/env python3
"""Collector cost beside node_exporter, in the same run.

Runs collect_bench (host + 8 fake GPUs, one cycle per second, /metrics text
rendered each cycle) and, at the same time, Debian's prometheus-node-exporter
scraped once per second; prints both as JSON: CPU ms per cycle/scrape and RSS.

  bench/collect/run.py build/release/bench/collect_bench build/release/src/collect/libnvidia-ml-fake.so [seconds]
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    bench, nvml = sys.argv[1], sys.argv[2]
    seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    port = free_port()
    ne = subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = "http://127.0.0.1:%d/metrics" % port
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        tw = subprocess.Popen([bench, "--nvml", nvml, "--cycles", str(seconds), "--interval-ms", "1000"],
                              stdout=subprocess.PIPE, text=True)
        c0 = cpu_seconds(ne.pid)
        start = time.time()
        for i in range(seconds):
            urllib.request.urlopen(url, timeout=10).read()
            time.sleep(max(0.0, start + i + 1 - time.time()))
        ne_cpu = cpu_seconds(ne.pid) - c0
        out, _ = tw.communicate(timeout=seconds + 60)
        result = {
            "trainwatch_collectors": json.loads(out),
            "node_exporter": {"scrapes": seconds, "cpu_ms_per_scrape": round(ne_cpu / seconds * 1000, 3),
                              "core_percent": round(ne_cpu / seconds * 100, 4), "rss_kib": rss_kib(ne.pid)},
        }
        print(json.dumps(result, indent=1))
    finally:
        ne.terminate()
        ne.wait()


if __name__ == "__main__":
    main()
