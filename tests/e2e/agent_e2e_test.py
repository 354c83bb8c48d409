#!/usr/bin/env python3
"""End-to-end tests of remote_write out: `trainwatch agent` and serve's `remote_write:`.

Usage: agent_e2e_test.py /path/to/trainwatch [unittest args]

- The agent scrapes a counter that goes up by one per scrape (so the test
  knows every value the agent read) and runs the real host collector; it
  forwards to a central `trainwatch serve`, which is killed with SIGKILL for
  TW_AGENT_OUTAGE_S seconds (default 60) and restarted: every value arrives
  exactly once, and the host series have no hole across the outage.
- The same agent forwards to Debian's Prometheus 2.42 (remote write
  receiver) and VictoriaMetrics 1.79 at once; both store what trainwatch
  stores (skipped when they are not installed).
- `trainwatch serve` with a `remote_write:` section forwards what it is sent.
Every process runs on 127.0.0.1 and is stopped by PID.
"""
import http.server
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, free_port, request

DEPLOY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy")
PROMETHEUS = "/usr/bin/prometheus"
VICTORIA = "/usr/bin/victoria-metrics"
OUTAGE_S = float(os.environ.get("TW_AGENT_OUTAGE_S", "60"))


class Counter:
    """A scrape target whose test_seq_total is 1, 2, 3, ... one per GET."""

    def __init__(self):
        self.lock = threading.Lock()
        self.served = []
        counter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with counter.lock:
                    n = len(counter.served) + 1
                    counter.served.append(n)
                body = ("# HELP test_seq_total Scrapes served.\n# TYPE test_seq_total counter\n"
                        "test_seq_total %d\n" % n).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()

    def last(self):
        with self.lock:
            return self.served[-1] if self.served else 0


def real(series):
    """Drops staleness markers (NaN): the stores differ in whether they export them."""
    return {k: [(t, v) for t, v in s if v == v] for k, s in series.items()}


def export(port, selector):
    """trainwatch's or VictoriaMetrics's /api/v1/export: {labels tuple: [(t, v)]}, without stale markers."""
    status, body = request(port, "GET", "/api/v1/export?match[]=" + urllib.parse.quote(selector), timeout=60)
    if status != 200:
        raise AssertionError("export: %d %r" % (status, body[:300]))
    out = {}
    for line in body.decode().splitlines():
        if line:
            obj = json.loads(line)
            key = tuple(sorted(obj["metric"].items()))
            # A stale marker (NaN) is exported as null.
            values = (float("nan") if v is None else float(v) for v in obj["values"])
            out.setdefault(key, []).extend(zip(obj["timestamps"], values))
    return real(out)


def prometheus_range(port, selector):
    """Every raw sample of `selector` in Prometheus over the last hour: {labels tuple: [(t ms, v)]}."""
    q = urllib.parse.urlencode({"query": selector + "[1h]", "time": "%.3f" % time.time()})
    status, body = request(port, "GET", "/api/v1/query?" + q, timeout=60)
    if status != 200:
        raise AssertionError("prometheus query: %d %r" % (status, body[:300]))
    out = {}
    for r in json.loads(body)["data"]["result"]:
        key = tuple(sorted(r["metric"].items()))
        out[key] = [(int(round(float(t) * 1000)), float(v)) for t, v in r["values"]]
    return out


def metric_value(port, name, labels_substr=""):
    status, body = request(port, "GET", "/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name) and (line[len(name)] in "{ ") and labels_substr in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class AgentE2ETest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_agent_e2e_")
        self.procs = []
        self.counter = Counter()

    def tearDown(self):
        self.counter.stop()
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_central(self, name, port):
        p = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, name), "--listen",
                     "127.0.0.1:%d" % port, "--collect.host=false", "--collect.gpu=false", "--scrape.self=false",
                     "--rules.default-pack=false"], os.path.join(self.tmp, name + ".log"))
        self.procs.append(p)
        return p.wait_ready(port)

    def start_agent(self, remotes, collect_host=True):
        conf = os.path.join(self.tmp, "agent.yml")
        with open(conf, "w") as f:
            f.write("global: {scrape_interval: 1s, external_labels: {cluster: e2e}}\n"
                    "scrape_configs:\n"
                    "  - job_name: gen\n"
                    "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
                    "remote_write:\n" % self.counter.port)
            for name, url in remotes:
                f.write("  - {url: '%s', name: %s, queue_config: {batch_send_deadline: 500ms, max_backoff: 2s}}\n"
                        % (url, name))
        self.agent_port = free_port()
        agent = Process([twtest.BINARY, "agent", "--config.file", conf, "--data-dir", os.path.join(self.tmp, "agent"),
                         "--listen", "127.0.0.1:%d" % self.agent_port, "--collect.gpu=false",
                         "--collect.host=%s" % ("true" if collect_host else "false"), "--collect.interval", "1s"],
                        os.path.join(self.tmp, "agent.log"))
        self.procs.append(agent)
        return agent.wait_ready(self.agent_port)

    def wait_seq(self, get, want, timeout=60):
        """Waits until the newest test_seq_total value `get()` returns reaches `want`; returns the samples."""
        deadline = time.time() + timeout
        samples = []
        while time.time() < deadline:
            series = {k: v for k, v in get().items() if dict(k).get("__name__") == "test_seq_total"}
            samples = next(iter(series.values()), [])
            if samples and max(v for _, v in samples) >= want:
                return series
            time.sleep(0.5)
        raise AssertionError("test_seq_total reached %s, want %d" % (max((v for _, v in samples), default=None), want))

    def assert_exactly_once(self, samples, last):
        values = [v for _, v in sorted(samples)]
        times = [t for t, _ in sorted(samples)]
        self.assertEqual(values, [float(i) for i in range(1, last + 1)], "every served value once, in order")
        self.assertEqual(len(set(times)), len(times), "no sample twice")

    def test_receiver_outage_loses_and_duplicates_nothing(self):
        port = free_port()
        central = self.start_central("central", port)
        agent = self.start_agent([("central", "http://127.0.0.1:%d/api/v1/write" % port)])
        self.wait_seq(lambda: export(port, "test_seq_total"), 3)
        central.proc.kill()  # SIGKILL: no goodbye to the agent
        central.proc.wait()
        central.log.close()
        self.procs.remove(central)
        down_at = time.time()
        time.sleep(OUTAGE_S)
        up_at = time.time()
        central = self.start_central("central", port)
        time.sleep(3)
        self.counter.stop()  # no more values; the target goes down
        last = self.counter.last()
        series = self.wait_seq(lambda: export(port, "test_seq_total"), last, timeout=120)
        self.assertEqual(len(series), 1, series.keys())
        labels = dict(next(iter(series)))
        self.assertEqual(labels["cluster"], "e2e")  # global.external_labels
        self.assertEqual(labels["job"], "gen")
        self.assertGreater(last, OUTAGE_S * 0.8)  # scraped every second throughout
        self.assert_exactly_once(next(iter(series.values())), last)

        # The host collector's series have no hole across the outage either.
        load = export(port, "node_load1")
        self.assertEqual(len(load), 1, load.keys())
        ts = sorted(t for t, _ in next(iter(load.values())))
        self.assertLess(ts[0], down_at * 1000)
        self.assertGreater(ts[-1], up_at * 1000)
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        self.assertLess(max(gaps), 3000, "a hole in node_load1 of %d ms" % max(gaps))

        self.assertGreater(metric_value(self.agent_port, "prometheus_remote_storage_samples_retried_total"), 0)
        self.assertEqual(metric_value(self.agent_port, "prometheus_remote_storage_samples_failed_total"), 0)
        self.assertGreater(metric_value(self.agent_port, "prometheus_remote_storage_samples_total"), last)

        # The agent serves health and /metrics, and no query API.
        status, body = request(self.agent_port, "GET", "/api/v1/query?query=up")
        self.assertEqual(status, 503, body)
        self.assertIn(b"agent mode", body)

    def test_prometheus_and_victoriametrics_receive_the_same(self):
        have_prom = os.path.exists(PROMETHEUS)
        have_vm = os.path.exists(VICTORIA)
        if not (have_prom or have_vm):
            self.skipTest("neither %s nor %s is installed" % (PROMETHEUS, VICTORIA))
        tw_port = free_port()
        self.start_central("central", tw_port)
        remotes = [("tw", "http://127.0.0.1:%d/api/v1/write" % tw_port)]
        if have_prom:
            prom_port = free_port()
            conf = os.path.join(self.tmp, "prometheus.yml")
            with open(conf, "w") as f:
                f.write("global: {scrape_interval: 1h}\nscrape_configs: []\n")
            p = Process([PROMETHEUS, "--config.file=" + conf, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                         "--web.listen-address=127.0.0.1:%d" % prom_port, "--web.enable-remote-write-receiver"],
                        os.path.join(self.tmp, "prometheus.log"))
            self.procs.append(p)
            p.wait_ready(prom_port)
            remotes.append(("prometheus", "http://127.0.0.1:%d/api/v1/write" % prom_port))
        if have_vm:
            vm_port = free_port()
            p = Process([VICTORIA, "-storageDataPath=" + os.path.join(self.tmp, "vm"),
                         "-httpListenAddr=127.0.0.1:%d" % vm_port, "-retentionPeriod=1y"],
                        os.path.join(self.tmp, "vm.log"))
            self.procs.append(p)
            p.wait_ready(vm_port, path="/health")
            remotes.append(("vm", "http://127.0.0.1:%d/api/v1/write" % vm_port))
        self.start_agent(remotes, collect_host=False)
        time.sleep(8)
        self.counter.stop()
        last = self.counter.last()
        tw = self.wait_seq(lambda: export(tw_port, "test_seq_total"), last)
        self.assert_exactly_once(next(iter(tw.values())), last)
        if have_prom:
            prom = self.wait_seq(lambda: prometheus_range(prom_port, "test_seq_total"), last)
            self.assertEqual(prom, tw, "Prometheus 2.42 stores what trainwatch stores")
        if have_vm:
            def vm():
                request(vm_port, "GET", "/internal/force_flush")
                return export(vm_port, "test_seq_total")
            got = self.wait_seq(vm, last)
            # VictoriaMetrics exports values as JSON numbers of its own precision; both are integers here.
            self.assertEqual(got, tw, "VictoriaMetrics 1.79 stores what trainwatch stores")
        # Every destination has its own counters on the agent's /metrics.
        for name, _ in remotes:
            self.assertGreater(metric_value(self.agent_port, "prometheus_remote_storage_samples_total",
                                            'remote_name="%s"' % name), 0, name)

    def run_shipped(self, name, args, config_text, central_port):
        """Starts an agent with a shipped command line: config, data dir and listen address moved
        into the test's directory, the remote_write URL pointed at the central trainwatch."""
        conf = os.path.join(self.tmp, name + ".yml")
        with open(conf, "w") as f:
            f.write(config_text.replace("http://trainwatch.example:9800", "http://127.0.0.1:%d" % central_port)
                    .replace("http://trainwatch.trainwatch.svc:9800", "http://127.0.0.1:%d" % central_port))
        port = free_port()
        moved = {"/etc/trainwatch/agent.yml": conf, "/var/lib/trainwatch-agent": os.path.join(self.tmp, name),
                 "0.0.0.0:9801": "127.0.0.1:%d" % port, "/host/proc": "/proc", "/host/sys": "/sys",
                 "/host/root/run/udev/data": "/run/udev/data", "/host/root": "/"}
        argv = []
        for a in args:
            for old, new in moved.items():
                a = a.replace(old, new)
            argv.append(a)
        p = Process([twtest.BINARY] + argv + ["--collect.interval=1s", "--collect.gpu=false"],
                    os.path.join(self.tmp, name + ".log"))
        self.procs.append(p)
        return p.wait_ready(port)

    def test_shipped_systemd_unit_and_daemonset_run_an_agent(self):
        central_port = free_port()
        self.start_central("central", central_port)
        with open(os.path.join(DEPLOY, "trainwatch-agent.service")) as f:
            exec_start = next(l for l in f if l.startswith("ExecStart=")).split("=", 1)[1]
        argv = shlex.split(exec_start)
        self.assertTrue(argv[0].endswith("/trainwatch"))
        with open(os.path.join(DEPLOY, "agent.yml")) as f:
            self.run_shipped("unit", argv[1:], f.read(), central_port)
        try:
            import yaml
        except ImportError:
            yaml = None
        if yaml is not None:  # python3-yaml (scripts/install-deps.sh installs it)
            with open(os.path.join(DEPLOY, "kubernetes", "trainwatch-agent.yaml")) as f:
                docs = list(yaml.safe_load_all(f))
            ds = next(d for d in docs if d["kind"] == "DaemonSet")
            cm = next(d for d in docs if d["kind"] == "ConfigMap")
            container = ds["spec"]["template"]["spec"]["containers"][0]
            self.assertTrue(ds["spec"]["template"]["spec"]["hostPID"])
            self.run_shipped("daemonset", container["args"], cm["data"]["agent.yml"], central_port)
        want = {"train-a"} | ({"k8s-train"} if yaml is not None else set())
        deadline = time.time() + 60
        clusters = set()
        while time.time() < deadline and clusters != want:
            clusters = {dict(k).get("cluster") for k in export(central_port, "node_load1")}
            time.sleep(0.5)
        self.assertEqual(clusters, want)

    def test_serve_remote_write_section_forwards_what_it_is_sent(self):
        central_port = free_port()
        self.start_central("central", central_port)
        conf = os.path.join(self.tmp, "edge.yml")
        with open(conf, "w") as f:
            f.write("remote_write:\n  - url: http://127.0.0.1:%d/api/v1/write\n"
                    "    queue_config: {batch_send_deadline: 200ms}\n"
                    "    write_relabel_configs: [{source_labels: [__name__], regex: 'secret_.*', action: drop}]\n"
                    % central_port)
        edge = twtest.Server(os.path.join(self.tmp, "edge"), ["--config.file", conf, "--scrape.self=false",
                                                             "--rules.default-pack=false"])
        edge.start()
        try:
            now = int(time.time() * 1000)
            lines = "".join('train_loss{run="r1"} %d %d\n' % (i, now - 1000 * (100 - i)) for i in range(100))
            lines += 'secret_token{run="r1"} 1 %d\n' % now
            status, body = edge.request("POST", "/api/v1/import/prometheus", lines.encode())
            self.assertEqual(status, 204, body)
            deadline = time.time() + 30
            got = {}
            while time.time() < deadline:
                got = export(central_port, 'train_loss')
                if got and len(next(iter(got.values()))) == 100:
                    break
                time.sleep(0.2)
            self.assertEqual(len(got), 1)
            self.assertEqual(sorted(next(iter(got.values()))), [(now - 1000 * (100 - i), float(i)) for i in range(100)])
            self.assertEqual(export(central_port, "secret_token"), {})  # dropped by write_relabel_configs
            self.assertEqual(edge.export("secret_token") != {}, True)  # but stored locally
            # Reload without the section stops forwarding; the edge keeps storing.
            with open(conf, "w") as f:
                f.write("global: {}\n")
            status, body = edge.request("POST", "/-/reload")
            self.assertEqual(status, 200, body)
            status, body = edge.request("POST", "/api/v1/import/prometheus",
                                        ('after_reload 1 %d\n' % now).encode())
            self.assertEqual(status, 204, body)
            time.sleep(1)
            self.assertEqual(export(central_port, "after_reload"), {})
            self.assertEqual(len(edge.export("after_reload")), 1)
        finally:
            edge.terminate()
            edge.stop_quietly()


if __name__ == "__main__":
    twtest.BINARY = sys.argv.pop(1)
    unittest.main()
