#!/usr/bin/env python3
"""Collector cost beside node_exporter, in the same run.

Runs collect_bench (host + 8 fake GPUs, one cycle per second, /metrics text
rendered each cycle) and, at the same time, Debian's prometheus-node-exporter
scraped once per second; prints both as JSON: CPU ms per cycle/scrape and RSS.

  bench/collect/run.py build/release/bench/collect_bench build/release/src/collect/libnvidia-ml-fake.so [seconds]
      [--agent build/release/src/app/trainwatch]

With --agent, the same seconds also run the real `trainwatch agent` (host +
the same 8 fake GPUs at --collect.interval 1s, its self-scrape, forwarding
by remote_write to a `trainwatch serve` receiver started for it) and report
its process CPU per cycle and its RSS (peak and at the end).
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


def rss_peak_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def wait_http(url, proc):
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError("%s exited" % proc.args[0])
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("%s did not come up" % url)


def start_agent(binary, bench, nvml, tmp):
    """A receiver and an agent forwarding to it; returns (receiver, agent, agent port)."""
    cfg = os.path.join(tmp, "nvml.txt")
    subprocess.check_call([bench, "--write-nvml-config", cfg])
    rport, aport = free_port(), free_port()
    recv = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(tmp, "recv"), "--listen",
                             "127.0.0.1:%d" % rport, "--collect.host=false", "--collect.gpu=false",
                             "--scrape.self=false", "--rules.default-pack=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http("http://127.0.0.1:%d/-/ready" % rport, recv)
    env = dict(os.environ, FAKE_NVML_CONFIG=cfg)
    agent = subprocess.Popen([binary, "agent", "--data-dir", os.path.join(tmp, "agent"), "--listen",
                              "127.0.0.1:%d" % aport, "--remote-write", "http://127.0.0.1:%d/api/v1/write" % rport,
                              "--collect.interval", "1s", "--collect.nvml-path", nvml],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_http("http://127.0.0.1:%d/-/ready" % aport, agent)
    return recv, agent, aport


def main():
    args = sys.argv[1:]
    agent_bin = None
    if "--agent" in args:
        i = args.index("--agent")
        agent_bin = args[i + 1]
        del args[i:i + 2]
    bench, nvml = args[0], args[1]
    seconds = int(args[2]) if len(args) > 2 else 60
    agent = recv = None
    if agent_bin:
        import tempfile
        tmp = tempfile.mkdtemp(prefix="tw_collect_agent_")
        recv, agent, aport = start_agent(agent_bin, bench, nvml, tmp)
        time.sleep(2)  # past start-up: NVML open, first cycles
        a0 = cpu_seconds(agent.pid)
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
        if agent:
            elapsed = time.time() - start + 0.0
            a_cpu = cpu_seconds(agent.pid) - a0
            series = sum(1 for l in urllib.request.urlopen("http://127.0.0.1:%d/metrics" % aport).read().decode()
                         .splitlines() if l.startswith(("node_", "DCGM_", "trainwatch_gpu_")))
            result["trainwatch_agent"] = {
                "seconds": round(elapsed, 1), "collected_series": series,
                "cpu_ms_per_cycle": round(a_cpu / elapsed * 1000, 3),
                "core_percent": round(a_cpu / elapsed * 100, 4),
                "rss_kib": rss_kib(agent.pid), "rss_peak_kib": rss_peak_kib(agent.pid)}
        print(json.dumps(result, indent=1))
    finally:
        ne.terminate()
        ne.wait()
        for p in (agent, recv):
            if p:
                p.terminate()
                p.wait()


if __name__ == "__main__":
    main()
