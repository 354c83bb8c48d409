#!/usr/bin/env python3
"""End-to-end test of POST /api/v1/write against a real Prometheus sender.

Usage: remote_write_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]

Starts `trainwatch serve` on a free loopback port, then Prometheus (default
/usr/bin/prometheus; the test is skipped when it is missing) scraping itself
every second and remote-writing to trainwatch, and waits until trainwatch
answers a query for prometheus_build_info. Both are stopped by PID.
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from protowire import ld, snappy_literal, uvarint
from twtest import Process, free_port, request

PROMETHEUS = "/usr/bin/prometheus"


def write_request(name, labels, value, ts_ms):
    lbl = ld(1, ld(1, b"__name__") + ld(2, name.encode()))
    for k, v in sorted(labels.items()):
        lbl += ld(1, ld(1, k.encode()) + ld(2, v.encode()))
    sample = b"\x09" + struct.pack("<d", value) + b"\x10" + uvarint(ts_ms)
    return ld(1, lbl + ld(2, sample))


class RemoteWriteE2ETest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_rw_e2e_")
        self.procs = []
        self.tw_port = free_port()
        tw = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "tw"), "--listen",
                   "127.0.0.1:%d" % self.tw_port, "--log.level", "info", "--collect.host=false",
                   "--collect.gpu=false"], os.path.join(self.tmp, "tw.log"))
        self.procs.append(tw)
        self.tw = tw
        tw.wait_ready(self.tw_port)

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, q):
        status, body = request(self.tw_port, "GET", "/api/v1/query?query=" + urllib.parse.quote(q))
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]["result"]

    def test_hand_encoded_body_and_errors(self):
        now = int(time.time() * 1000)
        body = snappy_literal(write_request("rw_e2e_metric", {"job": "x"}, 42.5, now))
        status, resp = request(self.tw_port, "POST", "/api/v1/write", body,
                               {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 204, resp)
        res = self.query("rw_e2e_metric")
        self.assertEqual(len(res), 1)
        self.assertEqual(res[0]["metric"], {"__name__": "rw_e2e_metric", "job": "x"})
        self.assertEqual(res[0]["value"][1], "42.5")
        # Bad snappy, truncated protobuf, duplicate labels: 400, nothing stored.
        dup = ld(1, ld(1, ld(1, b"__name__") + ld(2, b"rw_bad")) + ld(1, ld(1, b"a") + ld(2, b"1")) +
                 ld(1, ld(1, b"a") + ld(2, b"2")) + ld(2, b"\x09" + struct.pack("<d", 1.0) + b"\x10" + uvarint(now)))
        for bad in (b"not snappy at all", snappy_literal(write_request("rw_bad", {}, 1, now))[:-3],
                    snappy_literal(write_request("rw_bad", {}, 1, now)[:-2]), snappy_literal(dup)):
            status, resp = request(self.tw_port, "POST", "/api/v1/write", bad)
            self.assertEqual(status, 400, resp)
        self.assertEqual(self.query("rw_bad"), [])
        status, _ = request(self.tw_port, "GET", "/api/v1/write")
        self.assertEqual(status, 405)

    @unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
    def test_real_prometheus_sender(self):
        prom_port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:%d']
remote_write:
  - url: http://127.0.0.1:%d/api/v1/write
    queue_config:
      batch_send_deadline: 1s
""" % (prom_port, self.tw_port))
        prom = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                     "--web.listen-address=127.0.0.1:%d" % prom_port], os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)
        deadline = time.time() + 30
        res = []
        while time.time() < deadline:
            self.assertIsNone(prom.proc.poll(), "prometheus exited: " + prom.logs())
            self.assertIsNone(self.tw.proc.poll(), "trainwatch exited: " + self.tw.logs())
            res = self.query("prometheus_build_info")
            if res:
                break
            time.sleep(0.5)
        self.assertTrue(res, "no prometheus_build_info after 30 s\nprometheus: %s\ntrainwatch: %s" %
                        (prom.logs(), self.tw.logs()))
        self.assertEqual(res[0]["metric"].get("job"), "prometheus")
        # Every batch was accepted: no 4xx drops, no 5xx retries.
        self.assertNotIn("non-recoverable", prom.logs())
        self.assertNotIn("Failed to send batch", prom.logs())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: remote_write_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]")
    twtest.BINARY = sys.argv.pop(1)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        PROMETHEUS = sys.argv.pop(1)
    unittest.main()
