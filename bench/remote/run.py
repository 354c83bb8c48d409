#!/usr/bin/env python3
"""remote_write out beside the real agents: `trainwatch agent`, Debian's
Prometheus 2.42 in agent mode (--enable-feature=agent) and vmagent 1.79
scrape the same generated load (bench/scrape/generator.py) with the same
scrape config, at the same time, and each forwards everything by
remote_write to one VictoriaMetrics 1.79 receiver (an `agent` external
label keeps their series apart). Reports CPU seconds per million scraped
and forwarded samples and RSS of each agent, and checks in the receiver
that each one's series all arrived.

Usage: run.py /path/to/trainwatch [--targets 100] [--series 1000]
              [--interval 15] [--warmup 60] [--window 120]

CPU is user+system time of each agent process (/proc/PID/stat) over the
window, after a warm-up in which every target was scraped and forwarded;
samples = targets x series x window / interval.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scrape"))
from run import cpu_seconds, free_port, query, rss_mib, stop_all, wait_http  # noqa: E402  (bench/scrape/run.py)

PROMETHEUS = "/usr/bin/prometheus"
VMAGENT = "/usr/bin/vmagent"
VICTORIA = "/usr/bin/victoria-metrics"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trainwatch")
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--interval", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--window", type=int, default=120)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tw-remote-bench-")
    procs = []

    def start(name, argv):
        p = subprocess.Popen(argv, stdout=open(os.path.join(tmp, name + ".log"), "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    try:
        gen_port, vm_port = free_port(), free_port()
        here = os.path.dirname(os.path.abspath(__file__))
        gen = subprocess.Popen([sys.executable, os.path.join(here, "..", "scrape", "generator.py"), str(gen_port),
                                str(a.targets), str(a.series)], stdout=subprocess.PIPE)
        procs.append(gen)
        gen.stdout.readline()
        start("vm", [VICTORIA, "-storageDataPath=" + os.path.join(tmp, "vm"), "-httpListenAddr=127.0.0.1:%d" % vm_port,
                     "-retentionPeriod=1y", "-search.maxUniqueTimeseries=100000000"])
        wait_http(vm_port, "/health")
        url = "http://127.0.0.1:%d/api/v1/write" % vm_port
        groups = [{"targets": ["127.0.0.1:%d" % gen_port],
                   "labels": {"__metrics_path__": "/metrics/%d" % i, "target": str(i)}} for i in range(a.targets)]

        def config(agent, remote_write):
            path = os.path.join(tmp, agent + ".yml")
            with open(path, "w") as f:
                f.write("global: {scrape_interval: %ds, scrape_timeout: 10s, external_labels: {agent: %s}}\n"
                        % (a.interval, agent))
                f.write("scrape_configs:\n  - " + json.dumps({"job_name": "bench", "static_configs": groups}) + "\n")
                if remote_write:
                    f.write("remote_write:\n  - {url: '%s'}\n" % url)
            return path

        ports = {n: free_port() for n in ("trainwatch", "prometheus", "vmagent")}
        agents = {
            "trainwatch": start("trainwatch", [
                a.trainwatch, "agent", "--config.file", config("trainwatch", True), "--data-dir",
                os.path.join(tmp, "tw"), "--listen", "127.0.0.1:%d" % ports["trainwatch"], "--scrape.self=false",
                "--collect.host=false", "--collect.gpu=false"]),
            "prometheus": start("prometheus", [
                PROMETHEUS, "--enable-feature=agent", "--config.file=" + config("prometheus", True),
                "--storage.agent.path=" + os.path.join(tmp, "prom"),
                "--web.listen-address=127.0.0.1:%d" % ports["prometheus"], "--log.level=warn"]),
            "vmagent": start("vmagent", [
                VMAGENT, "-promscrape.config=" + config("vmagent", False), "-remoteWrite.url=" + url,
                "-remoteWrite.label=agent=vmagent", "-remoteWrite.tmpDataPath=" + os.path.join(tmp, "vmagent"),
                "-httpListenAddr=127.0.0.1:%d" % ports["vmagent"], "-loggerLevel=WARN"]),
        }
        wait_http(ports["trainwatch"], "/-/ready")
        wait_http(ports["prometheus"], "/-/ready")
        wait_http(ports["vmagent"], "/health")
        time.sleep(a.warmup)
        want = a.targets * a.series
        got = {}
        for _ in range(60):
            got = {r["metric"].get("agent", "?"): float(r["value"][1])
                   for r in query(vm_port, 'count by (agent) ({__name__=~"bench_metric_.*"})')}
            if all(got.get(n) == want for n in agents):
                break
            time.sleep(2)
        if not all(got.get(n) == want for n in agents):
            raise RuntimeError("series in the receiver after warm-up: %s, want %d each" % (got, want))
        c0 = {n: cpu_seconds(p.pid) for n, p in agents.items()}
        t0 = time.time()
        time.sleep(a.window)
        c1 = {n: cpu_seconds(p.pid) for n, p in agents.items()}
        window = time.time() - t0
        samples = a.targets * a.series * window / a.interval
        res = {}
        for n, p in agents.items():
            cpu = c1[n] - c0[n]
            res[n] = {"cpu_s": round(cpu, 2), "cpu_s_per_1M_samples": round(cpu / samples * 1e6, 3),
                      "rss_mib": round(rss_mib(p.pid), 1), "series_in_receiver": got.get(n)}
        res["load"] = {"targets": a.targets, "series": a.series, "interval_s": a.interval,
                       "window_s": round(window, 1), "samples_scraped_per_agent": int(samples)}
        for n in ("prometheus", "vmagent"):
            res["ratio_cpu_vs_" + n] = round(res["trainwatch"]["cpu_s"] / max(res[n]["cpu_s"], 1e-9), 3)
            res["ratio_rss_vs_" + n] = round(res["trainwatch"]["rss_mib"] / max(res[n]["rss_mib"], 1e-9), 3)
        print(json.dumps(res, indent=1))
    finally:
        stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
