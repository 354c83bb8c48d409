#!/usr/bin/env python3
"""The exposition parser stores the same series and values as Prometheus itself.

Usage: exposition_e2e_test.py /path/to/trainwatch /path/to/expo_dump [unittest args]

Serves each real exporter capture of ../shared/conformance/exposition from a
python http.server on 127.0.0.1 with the Content-Type it was captured with,
lets Debian's /usr/bin/prometheus (2.42) scrape them every second
(honor_labels, honor_timestamps), waits for the first successful scrape of
every file, and reads back what Prometheus stored (query API, the newest sample
of every series of the job, without Prometheus's own up and scrape_* series).
Then it compares exactly (label sets, and float values bit for bit; NaN and
+-Inf by name) with:
  - what trainwatch stores when the 0.0.4 files are POSTed to
    /api/v1/import/prometheus, and
  - what trainwatch's parser yields for every file (expo_dump prints it as
    JSON lines), which covers the OpenMetrics file.
Skipped when /usr/bin/prometheus is missing. All processes are stopped by PID.
"""
import http.server
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server, free_port, request

PROMETHEUS = "/usr/bin/prometheus"
EXPO_DUMP = None
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("TW_SHARED_DIR", os.path.join(HERE, "..", "..", "..", "shared"))
EXPO_DIR = os.path.join(SHARED, "conformance", "exposition")

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# file -> (Content-Type served, samples in the file)
FILES = {
    "node_exporter_1.5.txt": (TEXT, 507),
    "prometheus_2.42.txt": (TEXT, 364),
    "python_client_0.16_ml_sample.txt": (TEXT, 57),
    "python_client_0.16_ml_sample.openmetrics.txt": (OPENMETRICS, 57),
}


def job_of(name):
    return "expo_" + name.replace(".", "_")


def canon(value):
    """A float value as a comparable key: the IEEE bits, or NaN/+Inf/-Inf.
    (/api/v1/export writes NaN as null, as VictoriaMetrics does.)"""
    if value is None:
        return "NaN"
    if isinstance(value, str):
        low = value.lower()
        if low in ("nan",):
            return "NaN"
        if low in ("+inf", "inf", "infinity", "+infinity"):
            return "+Inf"
        if low in ("-inf", "-infinity"):
            return "-Inf"
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return struct.pack(">d", float(value)).hex()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = urllib.parse.unquote(self.path.lstrip("/"))
        if name not in FILES:
            self.send_error(404)
            return
        with open(os.path.join(EXPO_DIR, name), "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", FILES[name][0])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
@unittest.skipUnless(os.path.isdir(EXPO_DIR), "no conformance data")
class ExpositionE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-expo-e2e-")
        cls.files_srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        cls.target = "127.0.0.1:%d" % cls.files_srv.server_address[1]
        threading.Thread(target=cls.files_srv.serve_forever, daemon=True).start()
        cls.prom = None
        cls.prom_port = free_port()
        cfg = ["global:", "  scrape_interval: 1s", "  scrape_timeout: 1s", "scrape_configs:"]
        for name in FILES:
            cfg += ["  - job_name: %s" % job_of(name),
                    "    honor_labels: true",
                    "    honor_timestamps: true",
                    "    metrics_path: /%s" % name,
                    "    static_configs:",
                    "      - targets: ['%s']" % cls.target,
                    # The python client's samples carry their own job label.
                    "        labels: {expo_file: %s}" % job_of(name)]
        path = os.path.join(cls.tmp, "prometheus.yml")
        with open(path, "w") as f:
            f.write("\n".join(cfg) + "\n")
        cls.prom = Process([PROMETHEUS, "--config.file=" + path,
                            "--storage.tsdb.path=" + os.path.join(cls.tmp, "prom"),
                            "--web.listen-address=127.0.0.1:%d" % cls.prom_port],
                           os.path.join(cls.tmp, "prometheus.log"))
        try:
            cls.prom.wait_ready(cls.prom_port)
            cls.stored = cls.wait_for_scrapes()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.prom is not None:
            cls.prom.stop()
            cls.prom = None
        cls.files_srv.shutdown()
        cls.files_srv.server_close()
        if os.environ.get("TW_E2E_KEEP"):
            sys.stderr.write("kept %s\n" % cls.tmp)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def query(cls, q):
        status, body = request(cls.prom_port, "GET", "/api/v1/query?query=" + urllib.parse.quote(q), timeout=30)
        if status != 200:
            raise AssertionError("prometheus query %s: %d %r" % (q, status, body[:300]))
        return json.loads(body)["data"]["result"]

    @classmethod
    def wait_for_scrapes(cls):
        """Polls until every job has had a successful scrape (up == 1), then
        returns {file: {labels: value key}} of the newest sample of each series."""
        deadline = time.time() + 120
        while True:
            ups = {r["metric"]["expo_file"]: r["value"][1] for r in cls.query("up")}
            if all(ups.get(job_of(n)) == "1" for n in FILES):
                break
            if time.time() > deadline:
                status, body = request(cls.prom_port, "GET", "/api/v1/targets")
                raise AssertionError("not every file scraped within 120 s: up=%r targets=%s log=%s" %
                                     (ups, body[:2000], cls.prom.logs()))
            time.sleep(0.2)
        stored = {}
        for name in FILES:
            # The newest sample of every series of the job (scraped every second).
            by_labels = {}
            for r in cls.query('{expo_file="%s",__name__!~"up|scrape_.*"}' % job_of(name)):
                by_labels[cls.strip(r["metric"], name)] = canon(r["value"][1])
            stored[name] = by_labels
        return stored

    @classmethod
    def strip(cls, metric, name):
        """Drops the expo_file, job and instance labels Prometheus attached (the
        files' own job labels are kept: honor_labels)."""
        m = dict(metric)
        del m["expo_file"]
        if m.get("job") == job_of(name):
            del m["job"]
        if m.get("instance") == cls.target:
            del m["instance"]
        return tuple(sorted(m.items()))

    def dump(self, name):
        args = [EXPO_DUMP] + (["--openmetrics"] if FILES[name][0] == OPENMETRICS else []) + [os.path.join(EXPO_DIR, name)]
        out = subprocess.run(args, check=True, capture_output=True, timeout=60).stdout.decode()
        got = {}
        for line in out.splitlines():
            obj = json.loads(line)
            key = tuple(sorted(obj["metric"].items()))
            self.assertNotIn(key, got, "%s: series twice" % name)
            got[key] = canon(obj["value"])
        return got

    def assertSameData(self, name, got, what):
        want = self.stored[name]
        self.assertEqual(len(want), FILES[name][1], "%s: Prometheus stored %d series" % (name, len(want)))
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        self.assertFalse(missing or extra, "%s (%s): series only in Prometheus %r, only in trainwatch %r" %
                         (name, what, missing, extra))
        diff = [(k, want[k], got[k]) for k in want if want[k] != got[k]][:5]
        self.assertFalse(diff, "%s (%s): values differ (labels, prometheus, trainwatch): %r" % (name, what, diff))

    def test_parser_yields_what_prometheus_stores(self):
        for name in FILES:
            with self.subTest(file=name):
                self.assertSameData(name, self.dump(name), "parser")

    def test_import_stores_what_prometheus_stores(self):
        data_dir = os.path.join(self.tmp, "tw-data")
        server = Server(data_dir).start()
        try:
            for name, (ctype, _) in FILES.items():
                if ctype != TEXT:
                    continue
                with self.subTest(file=name):
                    with open(os.path.join(EXPO_DIR, name), "rb") as f:
                        body = f.read()
                    job = job_of(name)
                    status, resp = server.request("POST", "/api/v1/import/prometheus?extra_label=" +
                                                  urllib.parse.quote("tw_file=" + job), body)
                    self.assertEqual(status, 204, resp)
                    exported = server.export('{tw_file="%s"}' % job)
                    got = {}
                    for key, samples in exported.items():
                        self.assertEqual(len(samples), 1, key)
                        labels = tuple(kv for kv in key if kv[0] != "tw_file")
                        got[labels] = canon(samples[0][1])
                    self.assertSameData(name, got, "import")
        finally:
            server.stop_quietly()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: exposition_e2e_test.py /path/to/trainwatch /path/to/expo_dump [unittest args]")
    twtest.BINARY = sys.argv[1]
    EXPO_DUMP = sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
