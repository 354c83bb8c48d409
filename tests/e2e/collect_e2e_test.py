#!/usr/bin/env python3
"""End-to-end tests of the built-in collectors.

Host: Debian's prometheus-node-exporter 1.5 runs beside `trainwatch serve`
on the same machine; the node_* series trainwatch exposes on /metrics must
have node_exporter's names, types and label sets, gauges within tolerance and
counters bracketed by two node_exporter scrapes taken before and after
trainwatch's collection. The series are also stored (job="node") and the
self-scrape does not store them a second time.

GPU: serve loads the fake NVML (tests/fake_nvml, 8 GPUs, one lost, one XID,
compute processes, one of them a registered run) through --collect.nvml-path;
the DCGM series are checked through /api/v1/query.

Usage: collect_e2e_test.py /path/to/trainwatch /path/to/libnvidia-ml-fake.so [unittest args]
"""
import json
import math
import os
import re
import shutil
import subprocess
import socket
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server, free_port, request

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
FAKE_NVML = None

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Exposition text -> ({(name, labels tuple): value}, {name: type})."""
    series, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            continue
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            raise AssertionError("unparsable line %r" % line)
        labels = tuple(sorted(LABEL.findall(m.group(3) or "")))
        series[(m.group(1), labels)] = float(m.group(4))
    return series, types


def get_metrics(port):
    status, body = request(port, "GET", "/metrics", timeout=30)
    assert status == 200, status
    return body.decode()


def query(server, expr):
    status, body = server.request("GET", "/api/v1/query?query=" + urllib.parse.quote(expr))
    if status != 200:
        raise AssertionError("query %s: %d %s" % (expr, status, body[:300]))
    return json.loads(body)["data"]["result"]


def wait_for(fn, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


# Families whose values change too fast to compare between two processes
# (only their label sets are compared).
VOLATILE = {"node_procs_running", "node_procs_blocked", "node_disk_io_now", "node_uname_info"}


def gauge_close(name, a, b):
    if name.startswith("node_load"):
        return abs(a - b) <= 1.0
    if name == "node_time_seconds":
        return abs(a - b) <= 30
    if name.startswith("node_memory_"):
        # Both read /proc/meminfo, at different moments: system-wide figures
        # such as Committed_AS move by hundreds of MB while parallel builds and
        # tests start processes. A unit or field mistake is off by 1024x or
        # more, which this still catches.
        return abs(a - b) <= max(0.25 * max(abs(a), abs(b)), 256 << 20)
    if name.startswith("node_filesystem_"):
        return abs(a - b) <= max(0.01 * max(abs(a), abs(b)), 256 << 20)
    if name == "node_filefd_allocated":
        return abs(a - b) <= 500
    return a == b


class HostTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-collect-e2e-")
        cls.ne_port = free_port()
        cls.ne = Process([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % cls.ne_port],
                         os.path.join(cls.tmp, "node_exporter.log")).wait_ready(cls.ne_port, "/metrics")
        with open(os.path.join(cls.tmp, "tw.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\nalerting:\n  alertmanagers: []\n")
        try:
            cls.tw = Server(os.path.join(cls.tmp, "data"),
                            ["--collect.interval", "1s", "--collect.gpu=false",
                             "--config.file", os.path.join(cls.tmp, "tw.yml")], collect=True).start()
        except Exception:
            cls.ne.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.tw.stop_quietly()
        cls.ne.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def snapshot_between(self):
        """node_exporter before, trainwatch collected after that, node_exporter after."""
        before, ne_types = parse(get_metrics(self.ne_port))
        t0 = time.time()

        def fresh():
            s, t = parse(get_metrics(self.tw.port))
            ts = s.get(("node_time_seconds", ()))
            return (s, t) if ts is not None and ts > t0 + 0.05 else None
        tw, tw_types = wait_for(fresh, "a trainwatch collection after the first node_exporter scrape")
        after, _ = parse(get_metrics(self.ne_port))
        return before, tw, after, ne_types, tw_types

    def test_same_names_labels_and_values(self):
        before, tw, after, ne_types, tw_types = self.snapshot_between()
        tw_node = {k: v for k, v in tw.items() if k[0].startswith("node_")}
        self.assertGreater(len(tw_node), 50)
        families = {k[0] for k in tw_node}
        for fam in sorted(families):
            with self.subTest(family=fam):
                self.assertIn(fam, ne_types, "node_exporter has no %s" % fam)
                self.assertEqual(tw_types[fam], ne_types[fam], "TYPE of " + fam)
                tw_labels = {k[1] for k in tw_node if k[0] == fam}
                ne_labels = {k[1] for k in before if k[0] == fam} | {k[1] for k in after if k[0] == fam}
                # node_exporter's label sets (a series may come or go between scrapes: the union).
                self.assertTrue(tw_labels <= ne_labels, "%s: only in trainwatch: %s" % (fam, tw_labels - ne_labels))
                self.assertTrue({k[1] for k in before if k[0] == fam} & {k[1] for k in after if k[0] == fam} <= tw_labels,
                                "%s: only in node_exporter" % fam)
        # Core families of the issue are all there.
        for fam in ["node_cpu_seconds_total", "node_load1", "node_load5", "node_load15", "node_memory_MemTotal_bytes",
                    "node_memory_MemAvailable_bytes", "node_vmstat_pgfault", "node_vmstat_pgmajfault",
                    "node_filesystem_size_bytes", "node_filesystem_avail_bytes", "node_filesystem_readonly",
                    "node_disk_read_bytes_total", "node_network_receive_bytes_total",
                    "node_network_transmit_packets_total", "node_context_switches_total", "node_boot_time_seconds",
                    "node_procs_running", "node_forks_total", "node_intr_total", "node_filefd_allocated",
                    "node_filefd_maximum", "node_uname_info", "node_time_seconds"]:
            self.assertIn(fam, families)
        if os.path.exists("/proc/pressure/cpu"):
            self.assertIn("node_pressure_cpu_waiting_seconds_total", families)
        checked = 0
        for key, v in sorted(tw_node.items()):
            name = key[0]
            if name in VOLATILE or key not in before or key not in after:
                continue
            b, a = before[key], after[key]
            with self.subTest(series=key):
                if tw_types[name] == "counter" or name.startswith("node_vmstat_"):
                    # Collected between the two node_exporter scrapes. Slack: /proc/stat is in 1/100 s
                    # and node_exporter rounds pressure totals through floats.
                    slack = 0.011 if name.startswith("node_cpu") else 1e-6 * max(1.0, abs(v))
                    self.assertTrue(b - slack <= v <= a + slack, "%s: %r not in [%r, %r]" % (name, v, b, a))
                else:
                    # A system-wide gauge (node_memory_Committed_AS_bytes) can move by hundreds of
                    # MB between the two scrapes while parallel tests start processes: a value read
                    # between them may lie anywhere in their range.
                    self.assertTrue(gauge_close(name, v, b) or gauge_close(name, v, a) or min(a, b) <= v <= max(a, b),
                                    "%s: trainwatch %r, node_exporter %r / %r" % (name, v, b, a))
                checked += 1
        self.assertGreater(checked, 40)

    def test_stored_once_as_job_node(self):
        inst = wait_for(lambda: query(self.tw, 'node_boot_time_seconds{job="node"}'), "stored host series")
        self.assertEqual(len(inst), 1)
        labels = inst[0]["metric"]
        self.assertTrue(labels["instance"].endswith(":%d" % self.tw.port), labels)
        ncpu = len(query(self.tw, 'node_cpu_seconds_total{job="node",mode="idle"}'))
        self.assertEqual(ncpu, len([k for k in parse(get_metrics(self.tw.port))[0]
                                    if k[0] == "node_cpu_seconds_total" and ("mode", "idle") in k[1]]))
        # The self-scrape ran (job trainwatch) but dropped the collected families.
        wait_for(lambda: query(self.tw, 'up{job="trainwatch"} == 1'), "a self-scrape")
        wait_for(lambda: query(self.tw, 'trainwatch_http_requests_total{job="trainwatch"}'), "self-scraped metrics")
        # Three self-scrapes, all while /metrics already showed the node_* families (collected at start).
        self.assertIn("node_cpu_seconds_total", get_metrics(self.tw.port))
        wait_for(lambda: query(self.tw, 'count_over_time(up{job="trainwatch"}[1m]) >= 3'), "three self-scrapes")
        self.assertEqual(query(self.tw, 'count({__name__=~"node_.+",job="trainwatch"})'), [])

    def test_gpus_command_without_gpus(self):
        """`trainwatch gpus --once` against a server with no GPU series
        (--collect.gpu=false) says which metric it looked for and exits 1."""
        wait_for(lambda: query(self.tw, 'node_load1{job="node"}'), "host series")
        p = subprocess.run([twtest.BINARY, "gpus", "--once", "--url", "http://127.0.0.1:%d" % self.tw.port],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertIn("no GPU series found (looked for DCGM_FI_DEV_GPU_UTIL", p.stderr)


FAKE_CONFIG = """driver 550.54.15
gpus 8
"""


class GpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-collect-gpu-e2e-")
        cfg = FAKE_CONFIG
        for i in range(8):
            for k, v in [("util_gpu", 10 + i), ("util_mem", 20 + i), ("temp", 40 + i), ("power_mw", 300000 + i),
                         ("sm_clock", 1980), ("mem_clock", 2619), ("enc", 0), ("dec", 0),
                         ("fb_total", 81559 << 20), ("fb_reserved", 512 << 20), ("fb_used", (1000 + i) << 20),
                         ("fb_free", (80047 - i) << 20), ("field:83", 5000000 + i), ("field:82", 60),
                         ("gpm:5", 40 + i)]:
                cfg += "gpu %d %s %d\n" % (i, k, v)
        cfg += "gpu 3 lost\ngpu 6 xid 48\n"
        cfg += "gpu 1 process %d 4294967296\ngpu 1 process 999999 1048576\n" % os.getpid()
        cfg += "gpu 1 process_util %d 93\n" % os.getpid()
        cls.cfg_path = os.path.join(cls.tmp, "nvml.txt")
        with open(cls.cfg_path, "w") as f:
            f.write(cfg)
        os.environ["FAKE_NVML_CONFIG"] = cls.cfg_path
        cls.tw = Server(os.path.join(cls.tmp, "data"),
                        ["--collect.interval", "1s", "--collect.host=false", "--collect.nvml-path", FAKE_NVML],
                        collect=True).start()
        # The process on GPU 1 with our pid is a registered run of this host.
        body = json.dumps({"id": "e2e-run-1", "project": "vision", "name": "resnet-7",
                           "host": socket.gethostname(), "pid": os.getpid()}).encode()
        status, resp = cls.tw.request("POST", "/api/v1/runs", body, {"Content-Type": "application/json"})
        assert status == 200, (status, resp)

    @classmethod
    def tearDownClass(cls):
        cls.tw.stop_quietly()
        del os.environ["FAKE_NVML_CONFIG"]
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_dcgm_series(self):
        res = wait_for(lambda: query(self.tw, 'DCGM_FI_DEV_GPU_UTIL{job="dcgm"}'), "GPU series")
        by_gpu = {r["metric"]["gpu"]: r for r in res}
        self.assertEqual(sorted(by_gpu), ["0", "1", "2", "4", "5", "6", "7"])  # GPU 3 is lost
        m = by_gpu["2"]["metric"]
        self.assertEqual(m["UUID"], "GPU-00000002-0000-4000-8000-%012x" % (2 * 7919))
        self.assertEqual(m["pci_bus_id"], "00000000:38:00.0")
        self.assertEqual(m["device"], "nvidia2")
        self.assertEqual(m["modelName"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(m["Hostname"], socket.gethostname())
        self.assertEqual(m["DCGM_FI_DRIVER_VERSION"], "550.54.15")
        self.assertEqual(float(by_gpu["2"]["value"][1]), 12)
        power = {r["metric"]["gpu"]: float(r["value"][1]) for r in query(self.tw, "DCGM_FI_DEV_POWER_USAGE")}
        self.assertAlmostEqual(power["7"], 300.007)
        fb = {r["metric"]["gpu"]: float(r["value"][1]) for r in query(self.tw, "DCGM_FI_DEV_FB_USED")}
        self.assertEqual(fb["5"], 1005)
        xid = wait_for(lambda: query(self.tw, 'DCGM_FI_DEV_XID_ERRORS{gpu="6",err_code="48"}'), "the XID")
        self.assertEqual(xid[0]["metric"]["err_msg"], "Double Bit ECC Error")
        self.assertEqual(float(xid[0]["value"][1]), 48)
        # Stored once per cycle: after a few cycles rate() has two samples per GPU (energy is constant: 0 mJ/s).
        energy = wait_for(lambda: [r for r in query(self.tw, "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[30s])")]
                          if len(query(self.tw, "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[30s])")) == 7 else None,
                          "two energy samples per GPU")
        self.assertEqual({float(r["value"][1]) for r in energy}, {0.0})
        tensor = wait_for(lambda: query(self.tw, 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="7"}'), "GPM tensor activity")
        self.assertAlmostEqual(float(tensor[0]["value"][1]), 0.47)
        # /metrics shows them too, for a Prometheus that scrapes trainwatch as it scrapes dcgm-exporter.
        text = get_metrics(self.tw.port)
        self.assertIn("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter", text)

    def test_process_memory_with_run_labels(self):
        expr = 'trainwatch_gpu_process_memory_used_bytes{pid="%d"}' % os.getpid()
        res = wait_for(lambda: [r for r in query(self.tw, expr) if "run" in r["metric"]], "the run's process series")
        self.assertEqual(res[0]["metric"]["project"], "vision")
        self.assertEqual(res[0]["metric"]["run"], "resnet-7")
        self.assertEqual(res[0]["metric"]["gpu"], "1")
        self.assertEqual(float(res[0]["value"][1]), 4294967296)
        util = wait_for(lambda: query(self.tw, 'trainwatch_gpu_process_sm_utilization_percent{run="resnet-7"}'),
                        "the run's SM utilisation")
        self.assertEqual(float(util[0]["value"][1]), 93)
        other = query(self.tw, 'trainwatch_gpu_process_memory_used_bytes{pid="999999"}')
        self.assertEqual(len(other), 1)
        self.assertNotIn("run", other[0]["metric"])

    def test_run_gpu_time_and_idle_time(self):
        """Issue 19: the run whose process holds GPU 1 (11 % utilised: idle
        below the default 20 %) accumulates GPU time, all of it idle."""
        def usage():
            st, body = self.tw.request("GET", "/api/v1/runs/e2e-run-1")
            gpu = json.loads(body)["data"]["gpu"] if st == 200 else {}
            return gpu if gpu.get("hours", 0) * 3600 >= 2 else None
        gpu = wait_for(usage, "two seconds of the run's GPU time")
        self.assertAlmostEqual(gpu["idle_hours"], gpu["hours"], delta=1e-9)
        self.assertEqual(gpu["energy_kwh"], 0)  # the fake energy counter stands still
        self.assertEqual(gpu["cost"], 0)  # no --runs.gpu-hour-price
        res = wait_for(lambda: query(self.tw, 'trainwatch_run_gpu_seconds_total{run="resnet-7"}'), "the counter")
        self.assertGreater(float(res[0]["value"][1]), 0)
        self.assertEqual(res[0]["metric"]["project"], "vision")

    def test_gpus_command(self):
        """`trainwatch gpus --once`: one row per GPU the server has, with the
        run and rank using it."""
        wait_for(lambda: len(query(self.tw, 'DCGM_FI_DEV_GPU_UTIL{job="dcgm"}')) == 7 or None, "GPU series")
        wait_for(lambda: [r for r in query(self.tw, 'trainwatch_gpu_process_memory_used_bytes{run="resnet-7"}')],
                 "the run's process series")
        p = subprocess.run([twtest.BINARY, "gpus", "--once", "--url", "http://127.0.0.1:%d" % self.tw.port],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[1].startswith("HOST"), p.stdout)
        rows = {l.split()[1]: l for l in lines[2:]}
        self.assertEqual(sorted(rows, key=int), ["0", "1", "2", "4", "5", "6", "7"], p.stdout)  # GPU 3 is lost
        self.assertIn("NVIDIA H100 80GB HBM3", rows["2"])
        self.assertIn(" 12% ", rows["2"])  # util_gpu 10 + i
        self.assertIn(" 42C ", rows["2"])
        self.assertIn(" 1002 / 81559 ", rows["2"])  # fb_used 1000 + i MiB of FB_TOTAL (as nvidia-smi)
        self.assertIn(" 300W ", rows["2"])  # power_mw 300000 + i
        self.assertTrue(all(r.split()[0] == socket.gethostname() for r in rows.values()), p.stdout)
        self.assertTrue(rows["2"].endswith("  -"), rows["2"])  # no process on GPU 2
        # The run and rank of our pid first, then the process of no run.
        self.assertTrue(rows["1"].endswith("  vision/resnet-7 rank 0, pid 999999"), rows["1"])
        # An unreachable server is a clear error.
        p = subprocess.run([twtest.BINARY, "gpus", "--once", "--url", "http://127.0.0.1:%d" % free_port()],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("trainwatch gpus: http://127.0.0.1:", p.stderr)
        # Without --once (stdout not a terminal): successive tables, a blank line between them.
        p = subprocess.Popen([twtest.BINARY, "gpus", "--interval", "0.2", "--url",
                              "http://127.0.0.1:%d" % self.tw.port], stdout=subprocess.PIPE, text=True)
        try:
            out = ""
            deadline = time.time() + 30
            while out.count("\nHOST") < 2 and time.time() < deadline:
                out += p.stdout.readline()
        finally:
            p.send_signal(2)  # Ctrl-C ends it, exit 0
            rest, _ = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertNotIn("\x1b[", out)
        self.assertRegex(out, r"\n\ntrainwatch gpus  http://127\.0\.0\.1:%d  .*\nHOST" % self.tw.port)

    def test_missing_library_is_one_log_line(self):
        tw = Server(os.path.join(self.tmp, "data2"),
                    ["--collect.interval", "1s", "--collect.nvml-path", "/nonexistent/libnvidia-ml.so.1"],
                    collect=True).start()
        try:
            wait_for(lambda: query(tw, 'node_load1{job="node"}'), "host series")
            self.assertEqual(query(tw, '{__name__=~"DCGM_.+"}'), [])
            self.assertEqual(tw.logs().count("gpu collector off"), 1, tw.logs())
            self.assertIn("/nonexistent/libnvidia-ml.so.1", tw.logs())
        finally:
            tw.stop_quietly()


if __name__ == "__main__":
    twtest.BINARY = sys.argv.pop(1)
    FAKE_NVML = sys.argv.pop(1)
    unittest.main()
