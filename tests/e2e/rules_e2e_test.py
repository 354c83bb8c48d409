#!/usr/bin/env python3
"""End-to-end test of rule evaluation (src/rules) against the real binary:
a rule file from the config (recording + alerting rule), series pushed with
the import API, pending -> firing -> resolved seen through /api/v1/alerts,
/api/v1/rules and ALERTS, a restart mid-firing that keeps activeAt (for-state
restore), a bad rule file failing the reload while the old rules keep
running, the built-in pack loaded unless disabled, and the alerts forwarded
to Debian's real Alertmanager 0.25 (/usr/bin/prometheus-alertmanager),
seen in its /api/v2/alerts, also behind its --web.config.file with HTTPS
and basic auth (tls_config.ca_file, basic_auth.password_file).

Usage: rules_e2e_test.py /path/to/trainwatch [unittest args]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
CAPTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "conformance",
                        "http_api", "prometheus_2.42")

# The rules Prometheus 2.42 ran for the captured rules.json / alerts.json.
CAPTURED_RULES = """
groups:
  - name: example
    interval: 1s
    rules:
      - record: job:up:sum
        expr: sum by (job) (up)
      - alert: AlwaysFiring
        expr: vector(1)
        labels:
          severity: none
        annotations:
          summary: "test alert {{ $value }}"
      - alert: PendingForever
        expr: up == 1
        for: 1h
"""

RULES = """
groups:
  - name: e2e
    interval: 1s
    rules:
      - record: job:test_temp:max
        expr: max by (job) (test_temp)
      - alert: TempHigh
        expr: job:test_temp:max > 80
        for: 3s
        labels:
          severity: page
        annotations:
          summary: "temp {{ $value }} on {{ $labels.job }} in {{ $externalLabels.cluster }}"
"""

BAD_RULES = """
groups:
  - name: broken
    rules:
      - alert: Oops
        expr: sum(rate(x[5m])
"""


class Pusher:
    """Pushes test_temp{job="gpu"} = value with the current time every 200 ms."""

    def __init__(self):
        self.value = 50
        self.series = 'test_temp{job="gpu"}'
        self.server = None
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            srv = self.server
            if srv is not None:
                line = '%s %s %d\n' % (self.series, self.value, int(time.time() * 1000))
                try:
                    srv.request("POST", "/api/v1/import/prometheus", line.encode(), timeout=5)
                except OSError:
                    pass  # restarting
            time.sleep(0.2)

    def stop(self):
        self.stop_flag.set()
        self.thread.join()


class RulesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-rules-e2e-")
        self.data = os.path.join(self.tmp, "data")
        self.server = None
        self.am = None
        self.pusher = Pusher()
        rules_dir = os.path.join(self.tmp, "rules")
        os.makedirs(rules_dir)
        with open(os.path.join(rules_dir, "e2e.rules.yml"), "w") as f:
            f.write(RULES)
        self.am_port = twtest.free_port()
        self.config = os.path.join(self.tmp, "trainwatch.yml")
        with open(self.config, "w") as f:
            f.write("global:\n  evaluation_interval: 1s\n  external_labels: {cluster: e2e}\n"
                    "rule_files: ['rules/*.yml']\n"
                    "alerting:\n  alertmanagers:\n    - timeout: 5s\n      static_configs:\n"
                    "        - targets: ['127.0.0.1:%d']\n" % self.am_port)

    def tearDown(self):
        self.pusher.stop()
        if self.server:
            self.server.stop_quietly()
        if self.am:
            self.am.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_alertmanager(self):
        if not os.path.exists(ALERTMANAGER):
            print("SKIP the Alertmanager part: %s is missing" % ALERTMANAGER, file=sys.stderr)
            return
        am_cfg = os.path.join(self.tmp, "alertmanager.yml")
        with open(am_cfg, "w") as f:
            f.write("route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n")
        self.am = Process([ALERTMANAGER, "--config.file=" + am_cfg, "--storage.path=" + os.path.join(self.tmp, "am"),
                           "--web.listen-address=127.0.0.1:%d" % self.am_port, "--cluster.listen-address="],
                          os.path.join(self.tmp, "alertmanager.log"))
        self.am.wait_ready(self.am_port)

    def start(self, *extra):
        self.server = Server(self.data, extra_args=[
            "--config.file", self.config, "--scrape.self=false", "--rules.alert.for-grace-period=1s",
            "--rules.alert.resend-delay=1s"] + list(extra)).start()
        self.pusher.server = self.server
        return self.server

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, "%s: %r" % (path, body[:500]))
        return json.loads(body)["data"]

    def alerts(self):
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == "TempHigh"]

    def query(self, expr):
        return self.get("/api/v1/query?query=" + urllib.parse.quote(expr))["result"]

    def wait(self, what, fn, timeout=30):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(0.2)
        self.fail("timed out waiting for %s (last: %r)\n%s" % (what, last, self.server.logs()))

    def am_alerts(self):
        status, body = twtest.request(self.am_port, "GET", "/api/v2/alerts")
        self.assertEqual(status, 200)
        return [a for a in json.loads(body) if a["labels"].get("alertname") == "TempHigh"]

    def test_lifecycle_restart_reload_and_alertmanager(self):
        self.start_alertmanager()
        self.start()

        # The rule file and the built-in pack are loaded; the group evaluates.
        groups = self.get("/api/v1/rules")["groups"]
        names = {g["name"] for g in groups}
        self.assertIn("e2e", names)
        self.assertTrue(any(g["file"] == "builtin:training.rules.yml" for g in groups), names)
        e2e = self.wait("an evaluation", lambda: [g for g in self.get("/api/v1/rules?rule_group[]=e2e")["groups"]
                                                  if g["rules"][1]["health"] == "ok"])[0]
        self.assertEqual(e2e["interval"], 1)
        self.assertEqual(e2e["file"], os.path.join(self.tmp, "rules", "e2e.rules.yml"))
        alert_rule = e2e["rules"][1]
        self.assertEqual(alert_rule["type"], "alerting")
        self.assertEqual(alert_rule["duration"], 3)
        self.assertEqual(alert_rule["query"], "job:test_temp:max > 80")
        self.assertEqual(alert_rule["state"], "inactive")
        self.assertEqual(alert_rule["alerts"], [])
        self.assertEqual(e2e["rules"][0]["type"], "recording")
        recorded = self.wait("the recorded series", lambda: self.query("job:test_temp:max"))
        self.assertEqual(recorded[0]["metric"], {"__name__": "job:test_temp:max", "job": "gpu"})
        records = self.get("/api/v1/rules?type=record&rule_group[]=e2e")["groups"]
        self.assertEqual([r["name"] for r in records[0]["rules"]], ["job:test_temp:max"])

        # Over the threshold: pending, then firing after `for`.
        self.pusher.value = 90
        pending = self.wait("pending", lambda: [a for a in self.alerts() if a["state"] == "pending"])[0]
        self.assertEqual(pending["labels"], {"alertname": "TempHigh", "job": "gpu", "severity": "page"})
        self.assertEqual(pending["annotations"], {"summary": "temp 90 on gpu in e2e"})
        self.assertEqual(pending["value"], "9e+01")
        firing = self.wait("firing", lambda: [a for a in self.alerts() if a["state"] == "firing"])[0]
        self.assertEqual(firing["activeAt"], pending["activeAt"])
        self.wait("ALERTS firing", lambda: self.query('ALERTS{alertname="TempHigh",alertstate="firing"}'))
        fs = self.query('ALERTS_FOR_STATE{alertname="TempHigh"}')
        self.assertEqual(len(fs), 1)
        self.assertEqual(fs[0]["metric"], {"__name__": "ALERTS_FOR_STATE", "alertname": "TempHigh", "job": "gpu",
                                           "severity": "page"})
        self.assertEqual(self.query('ALERTS{alertname="TempHigh",alertstate="pending"}'), [],
                         "the pending series went stale")

        # Forwarded to the real Alertmanager, with the external labels.
        am = self.am and self.wait("the alert in Alertmanager", self.am_alerts)[0]
        if self.am:
            self.assertEqual(am["labels"], {"alertname": "TempHigh", "job": "gpu", "severity": "page", "cluster": "e2e"})
            self.assertEqual(am["annotations"], {"summary": "temp 90 on gpu in e2e"})
            self.assertEqual(am["status"]["state"], "active")
            self.assertIn("/graph?g0.expr=", am["generatorURL"])

        # A bad rule file fails the reload, precisely, and the old rules keep running.
        with open(os.path.join(self.tmp, "rules", "zz-bad.rules.yml"), "w") as f:
            f.write(BAD_RULES)
        status, body = self.server.request("POST", "/-/reload")
        self.assertEqual(status, 500)
        msg = body.decode()
        self.assertIn("zz-bad.rules.yml: 6:15: group \"broken\", rule 1, \"Oops\": could not parse expression", msg)
        os.remove(os.path.join(self.tmp, "rules", "zz-bad.rules.yml"))
        self.assertEqual([a["state"] for a in self.alerts()], ["firing"])
        status, body = self.server.request("POST", "/-/reload")
        self.assertEqual(status, 200, body)
        self.assertEqual([a["state"] for a in self.alerts()], ["firing"], "a good reload keeps the alert state")

        # Restart mid-firing: after the for-state restore the alert is firing
        # with its activeAt (to the second, as ALERTS_FOR_STATE stores it).
        active_at = firing["activeAt"]
        self.assertEqual(self.server.terminate(), 0)
        self.server.stop_quietly()
        self.start()
        restored = self.wait("firing after restart",
                             lambda: [a for a in self.alerts() if a["state"] == "firing"], timeout=30)[0]
        self.assertEqual(restored["activeAt"][:19], active_at[:19], (restored, active_at))
        self.assertEqual(restored["activeAt"][19:], "Z")

        # Back under the threshold: resolved, ALERTS goes stale, Alertmanager sees it resolved.
        self.pusher.value = 50
        self.wait("resolved", lambda: not self.alerts() and [True])
        self.wait("ALERTS stale", lambda: self.query('ALERTS{alertname="TempHigh"}') == [] and [True])
        if self.am:
            self.wait("resolved in Alertmanager", lambda: self.am_alerts() == [] and [True])
            status, metrics = self.server.request("GET", "/metrics")
            self.assertIn(b'trainwatch_alertmanager_alerts_sent_total{alertmanager="http://127.0.0.1:%d/api/v2/alerts"}'
                          % self.am_port, metrics)

        # The built-in pack can be disabled.
        self.assertEqual(self.server.terminate(), 0)
        self.server.stop_quietly()
        self.start("--rules.default-pack=false")
        groups = self.get("/api/v1/rules")["groups"]
        self.assertEqual([g["name"] for g in groups], ["e2e"])

    def test_api_matches_prometheus_shape(self):
        if not os.path.exists(os.path.join(CAPTURES, "rules.json")):
            self.skipTest("captures not found at %s" % CAPTURES)
        from http_api_e2e_test import shape_diff
        with open(os.path.join(self.tmp, "rules", "e2e.rules.yml"), "w") as f:
            f.write(CAPTURED_RULES)
        self.start("--rules.default-pack=false")
        self.pusher.series = 'up{instance="127.0.0.1:19090",job="prometheus"}'
        self.pusher.value = 1

        def ready():
            d = self.get("/api/v1/alerts")["alerts"]
            return len(d) == 2 and d
        self.wait("AlwaysFiring and PendingForever", ready)
        with open(os.path.join(CAPTURES, "rules.json")) as f:
            ref = json.load(f)
        with open(os.path.join(CAPTURES, "alerts.json")) as f:
            ref_alerts = json.load(f)
        status, body = self.server.request("GET", "/api/v1/rules")
        ours = json.loads(body)
        ref_group, group = ref["data"]["groups"][0], ours["data"]["groups"][0]
        self.assertEqual(set(group), set(ref_group))
        ref_rules = {r["name"]: r for r in ref_group["rules"]}
        for r in group["rules"]:
            self.assertIsNone(shape_diff(r, ref_rules[r["name"]]), r)
            for k in ("name", "query", "labels", "annotations", "type", "duration", "keepFiringFor"):
                if k in ref_rules[r["name"]]:
                    self.assertEqual(r[k], ref_rules[r["name"]][k], k)
            if r["type"] == "alerting":
                self.assertEqual(r["state"], ref_rules[r["name"]]["state"])
                self.assertEqual([(a["labels"], a["annotations"], a["state"], a["value"]) for a in r["alerts"]],
                                 [(a["labels"], a["annotations"], a["state"], a["value"])
                                  for a in ref_rules[r["name"]]["alerts"]])
        status, body = self.server.request("GET", "/api/v1/alerts")
        alerts = json.loads(body)
        key = lambda a: a["labels"]["alertname"]
        for ours_a, ref_a in zip(sorted(alerts["data"]["alerts"], key=key), sorted(ref_alerts["data"]["alerts"], key=key)):
            self.assertIsNone(shape_diff(ours_a, ref_a), ours_a)
        self.assertEqual([(a["labels"], a["annotations"], a["state"], a["value"]) for a in sorted(alerts["data"]["alerts"], key=key)],
                         [(a["labels"], a["annotations"], a["state"], a["value"]) for a in sorted(ref_alerts["data"]["alerts"], key=key)])

    def test_bad_rule_file_at_start_is_an_error(self):
        with open(os.path.join(self.tmp, "rules", "bad.rules.yml"), "w") as f:
            f.write(BAD_RULES)
        srv = Server(self.data, extra_args=["--config.file", self.config])
        with self.assertRaises(RuntimeError) as cm:
            srv.start(timeout=20)
        srv.stop_quietly()
        self.assertIn("bad.rules.yml: 6:15: group \"broken\", rule 1, \"Oops\": could not parse expression",
                      str(cm.exception))


class SecuredAlertmanagerTest(unittest.TestCase):
    """Forwarding to the real Alertmanager 0.25 behind its --web.config.file:
    HTTPS with a self-signed certificate (trusted through tls_config.ca_file)
    and basic auth with a bcrypt hash (password from basic_auth.password_file)."""

    def setUp(self):
        if not os.path.exists(ALERTMANAGER) or not shutil.which("openssl"):
            self.skipTest("needs %s and openssl" % ALERTMANAGER)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # crypt: in Debian's 3.11, gone in 3.13
            import crypt  # bcrypt ($2b$) hashes for the web config
        self.tmp = tempfile.mkdtemp(prefix="tw-secure-am-")
        self.server = self.am = None
        self.cert, self.key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", self.key, "-out", self.cert],
                       check=True, capture_output=True)
        self.password = "s3cret-%d" % os.getpid()
        with open(os.path.join(self.tmp, "web.yml"), "w") as f:
            f.write("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  tw: '%s'\n" % (
                self.cert, self.key, crypt.crypt(self.password, crypt.mksalt(crypt.METHOD_BLOWFISH))))
        with open(os.path.join(self.tmp, "am.yml"), "w") as f:
            f.write("route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n")
        self.am_port = twtest.free_port()
        self.am = Process([ALERTMANAGER, "--config.file=" + os.path.join(self.tmp, "am.yml"),
                           "--storage.path=" + os.path.join(self.tmp, "am"), "--cluster.listen-address=",
                           "--web.listen-address=127.0.0.1:%d" % self.am_port,
                           "--web.config.file=" + os.path.join(self.tmp, "web.yml")],
                          os.path.join(self.tmp, "alertmanager.log"))
        deadline = time.time() + 30
        while self.am_get("/-/ready")[0] != 200:
            self.assertLess(time.time(), deadline, "alertmanager not ready: " + self.am.logs())
            time.sleep(0.1)

    def tearDown(self):
        if self.server:
            self.server.stop_quietly()
        if self.am:
            self.am.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def am_get(self, path, password=None):
        import base64
        import http.client
        import ssl
        ctx = ssl.create_default_context(cafile=self.cert)
        conn = http.client.HTTPSConnection("127.0.0.1", self.am_port, context=ctx, timeout=5)
        auth = base64.b64encode(("tw:" + (password or self.password)).encode()).decode()
        try:
            conn.request("GET", path, headers={"Authorization": "Basic " + auth})
            r = conn.getresponse()
            return r.status, r.read()
        except OSError:
            return 0, b""
        finally:
            conn.close()

    def test_basic_auth_and_tls(self):
        self.assertEqual(self.am_get("/api/v2/alerts", password="wrong")[0], 401)  # the web config is on
        pw_file = os.path.join(self.tmp, "am-password")
        with open(pw_file, "w") as f:
            f.write(self.password + "\n")
        os.makedirs(os.path.join(self.tmp, "rules"))
        with open(os.path.join(self.tmp, "rules", "always.yml"), "w") as f:
            f.write("groups:\n  - name: g\n    interval: 1s\n    rules:\n"
                    "      - alert: Always\n        expr: vector(1)\n        labels: {severity: none}\n")
        config = os.path.join(self.tmp, "trainwatch.yml")
        with open(config, "w") as f:
            f.write("global:\n  evaluation_interval: 1s\nrule_files: ['rules/*.yml']\n"
                    "alerting:\n  alertmanagers:\n    - scheme: https\n      timeout: 5s\n"
                    "      basic_auth: {username: tw, password_file: '%s'}\n"
                    "      tls_config: {ca_file: '%s'}\n"
                    "      static_configs: [{targets: ['127.0.0.1:%d']}]\n" % (pw_file, self.cert, self.am_port))
        self.server = Server(os.path.join(self.tmp, "data"), extra_args=[
            "--config.file", config, "--scrape.self=false", "--rules.default-pack=false",
            "--rules.alert.resend-delay=1s"]).start()
        deadline = time.time() + 30
        names = []
        while time.time() < deadline:
            status, body = self.am_get("/api/v2/alerts")
            names = [a["labels"]["alertname"] for a in json.loads(body)] if status == 200 else []
            if "Always" in names:
                break
            time.sleep(0.2)
        self.assertIn("Always", names, self.server.logs())
        status, body = self.server.request("GET", "/metrics")
        self.assertIn(('trainwatch_alertmanager_alerts_sent_total{alertmanager="https://127.0.0.1:%d/api/v2/alerts"}'
                       % self.am_port).encode(), body)


if __name__ == "__main__":
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
