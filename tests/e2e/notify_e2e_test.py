#!/usr/bin/env python3
"""The embedded Alertmanager end to end: `trainwatch serve
--alertmanager.config.file` with receivers on loopback.

Usage: notify_e2e_test.py /path/to/trainwatch [unittest args]

- A webhook receiver (Python HTTP server) gets exactly one notification per
  group, several alerts batched into one, one resolved notification; a
  silence and an inhibition suppress; a restart mid-way repeats nothing and
  keeps silences; a failing receiver is retried and every attempt is in
  /api/v1/notifications and /metrics.
- Email reaches a local SMTP server (Debian's python3-aiosmtpd) with AUTH
  (LOGIN with auth_password_file, CRAM-MD5 checked by an RFC 2195 handler)
  and STARTTLS, with the rendered subject, header and body.
- run.alert() of the real Python client reaches the webhook.
- A rule (--config.file rule_files) crossing its threshold fires after `for`
  and reaches the webhook once with its templated annotation, and resolves once.
- A bad alertmanager.yml fails /-/reload with the line and field and the
  previous config keeps running; `trainwatch check config` agrees with
  `amtool check-config`, and `amtool silence query` / `alert query` work
  against trainwatch (skipped when /usr/bin/amtool is missing).
"""
import hashlib
import hmac
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402

AMTOOL = "/usr/bin/amtool"


class Hook:
    """A webhook receiver on loopback recording every POST body; HTTPS with
    tls_dir's cert.pem (CN=localhost) and key.pem."""

    def __init__(self, tls_dir=None):
        self.lock = threading.Lock()
        self.bodies = []
        self.auth = []
        self.fail_next = 0
        hook = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with hook.lock:
                    if hook.fail_next > 0:
                        hook.fail_next -= 1
                        self.send_response(500)
                        self.end_headers()
                        return
                    hook.bodies.append(json.loads(body))
                    hook.auth.append(self.headers.get("Authorization"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        if tls_dir:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(tls_dir, "cert.pem"), os.path.join(tls_dir, "key.pem"))
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def take(self):
        with self.lock:
            b, self.bodies = self.bodies, []
            return b

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def rfc3339(dt):
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def alert(name, instance, severity="warning", ends=None, **labels):
    a = {"labels": dict(alertname=name, instance=instance, severity=severity, **labels),
         "annotations": {"summary": "%s on %s" % (name, instance)},
         "generatorURL": "http://tw/graph?g0.expr=up"}
    if ends is not None:
        a["endsAt"] = rfc3339(ends)
    return a


CONFIG = """
templates: ['*.tmpl']
global:
  resolve_timeout: 1h
  smtp_smarthost: '127.0.0.1:{smtp}'
  smtp_from: 'trainwatch@example.org'
  smtp_require_tls: false
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
  routes:
    - matchers: ['team="mail"']
      receiver: mail
    - matchers: ['team="tls"']
      receiver: mail-tls
    - matchers: ['team="cram"']
      receiver: mail-cram
    - matchers: ['team="https"']
      receiver: hook-tls
inhibit_rules:
  - source_matchers: [severity="critical"]
    target_matchers: [severity="warning"]
    equal: [instance]
receivers:
  - name: hook
    webhook_configs:
      - url: 'http://127.0.0.1:{hook}/hook'
        http_config: {{basic_auth: {{username: tw, password: secret}}}}
  - name: hook-tls
    webhook_configs:
      - url: 'https://127.0.0.1:{hook_tls}/hook'
        http_config: {{tls_config: {{ca_file: '{ca_file}', server_name: localhost}}}}
  - name: mail
    email_configs:
      - to: 'oncall@example.org'
        auth_username: alice
        auth_password_file: '{password_file}'
        headers: {{X-Group: '{{{{ .GroupLabels.alertname | toUpper }}}}', X-Custom: '{{{{ template "mail.custom" . }}}}'}}
        text: '{{{{ range .Alerts }}}}{{{{ .Annotations.summary }}}}{{{{ end }}}} ({{{{ .Status }}}})'
  - name: mail-cram
    email_configs:
      - to: 'cram@example.org'
        auth_username: alice
        auth_secret: looking-glass
  - name: mail-tls
    email_configs:
      - to: 'tls@example.org'
        smarthost: '127.0.0.1:{smtp_tls}'
        require_tls: true
        tls_config: {{ca_file: '{ca_file}', server_name: localhost}}
"""


class Smtp:
    """Debian's python3-aiosmtpd on loopback, recording each message."""

    def __init__(self, tls_dir=None):
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword
        self.messages = []
        self.logins = []
        outer = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                outer.messages.append((envelope.mail_from, list(envelope.rcpt_tos),
                                       envelope.content.decode("utf-8", "replace")))
                return "250 OK"

            async def auth_CRAM__MD5(self, server, args):
                # RFC 2195: the server's challenge, the client's "user hex(HMAC-MD5(secret, challenge))".
                challenge = b"<%d.%d@trainwatch.test>" % (os.getpid(), time.time_ns())
                resp = await server.challenge_auth(challenge)
                if not isinstance(resp, bytes):
                    return AuthResult(success=False)
                user, _, digest = resp.partition(b" ")
                want = hmac.new(b"looking-glass", challenge, hashlib.md5).hexdigest().encode()
                ok = user == b"alice" and digest == want
                outer.logins.append(("CRAM-MD5", ok))
                return AuthResult(success=ok)

        def auth(server, session, envelope, mechanism, data):
            ok = isinstance(data, LoginPassword) and data.login == b"alice" and data.password == b"wonderland"
            outer.logins.append((mechanism, ok))
            return AuthResult(success=ok)

        self.port = twtest.free_port()
        kw = {}
        if tls_dir is not None:
            import ssl
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(os.path.join(tls_dir, "cert.pem"), os.path.join(tls_dir, "key.pem"))
            kw = {"tls_context": ctx, "require_starttls": True}
        else:
            kw = {"authenticator": auth, "auth_require_tls": False}
        self.ctl = Controller(Handler(), hostname="127.0.0.1", port=self.port, **kw)
        self.ctl.start()

    def close(self):
        self.ctl.stop()


def have_aiosmtpd():
    try:
        import aiosmtpd  # noqa: F401
        return True
    except ImportError:
        return False


class NotifyE2ETest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-notify-e2e-")
        self.hook = Hook()
        self.smtp = Smtp() if have_aiosmtpd() else None
        self.smtp_tls = None
        self.hook_tls = None
        if shutil.which("openssl"):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                            "/CN=localhost", "-keyout", os.path.join(self.tmp, "key.pem"), "-out",
                            os.path.join(self.tmp, "cert.pem")], check=True, capture_output=True)
            self.hook_tls = Hook(tls_dir=self.tmp)
            if have_aiosmtpd():
                self.smtp_tls = Smtp(tls_dir=self.tmp)
        self.am_path = os.path.join(self.tmp, "alertmanager.yml")
        self.password_file = os.path.join(self.tmp, "smtp-password")
        with open(self.password_file, "w") as f:
            f.write("wonderland\n")  # Alertmanager trims the file's whitespace
        with open(os.path.join(self.tmp, "custom.tmpl"), "w") as f:
            f.write('{{ define "mail.custom" }}custom {{ .GroupLabels.alertname }}{{ end }}\n\n'
                    '{{ define "unused" }}x{{ end }}\n')
        self.write_config()
        self.server = twtest.Server(os.path.join(self.tmp, "data"),
                                    ["--alertmanager.config.file", self.am_path, "--rules.default-pack=false",
                                     "--scrape.self=false"])
        self.server.start()

    def tearDown(self):
        self.server.stop_quietly()
        self.hook.close()
        if self.hook_tls:
            self.hook_tls.close()
        if self.smtp:
            self.smtp.close()
        if self.smtp_tls:
            self.smtp_tls.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write_config(self, text=None):
        with open(self.am_path, "w") as f:
            f.write(text if text is not None else CONFIG.format(
                hook=self.hook.port, hook_tls=self.hook_tls.port if self.hook_tls else 1, smtp=self.smtp.port if self.smtp else 1, password_file=self.password_file,
                smtp_tls=self.smtp_tls.port if self.smtp_tls else 1, ca_file=os.path.join(self.tmp, "cert.pem")))

    def post_alerts(self, alerts):
        status, body = self.server.request("POST", "/api/v2/alerts", json.dumps(alerts),
                                           {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def wait_for(self, cond, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = cond()
            if v:
                return v
            time.sleep(0.1)
        self.fail("condition not met within %ds; log: %s" % (timeout, self.server.logs()))

    def test_group_batches_once_then_resolved_once(self):
        self.post_alerts([alert("GpuHot", "gpu0"), alert("GpuHot", "gpu1"), alert("GpuHot", "gpu2")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(len(got), 1)
        n = got[0]
        self.assertEqual(n["version"], "4")
        self.assertEqual(n["status"], "firing")
        self.assertEqual(n["receiver"], "hook")
        self.assertEqual(n["groupLabels"], {"alertname": "GpuHot"})
        self.assertEqual(n["groupKey"], '{}:{alertname="GpuHot"}')
        self.assertEqual(n["commonLabels"], {"alertname": "GpuHot", "severity": "warning"})
        self.assertEqual(n["truncatedAlerts"], 0)
        self.assertEqual(sorted(a["labels"]["instance"] for a in n["alerts"]), ["gpu0", "gpu1", "gpu2"])
        self.assertEqual(n["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z")
        self.assertEqual(self.hook.auth[0], "Basic dHc6c2VjcmV0")
        # Re-sent alerts (as Prometheus does) change nothing: no repeat within repeat_interval.
        for _ in range(3):
            self.post_alerts([alert("GpuHot", "gpu0"), alert("GpuHot", "gpu1"), alert("GpuHot", "gpu2")])
            time.sleep(1.5)
        self.assertEqual(self.hook.take(), [])
        now = datetime.now(timezone.utc)
        self.post_alerts([alert("GpuHot", i, ends=now) for i in ("gpu0", "gpu1", "gpu2")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["status"], "resolved")
        self.assertEqual({a["status"] for a in got[0]["alerts"]}, {"resolved"})
        time.sleep(5)
        self.assertEqual(self.hook.take(), [])
        self.assertEqual(self.get("/api/v2/alerts"), [])

    def test_silence_suppresses_and_amtool(self):
        start = datetime.now(timezone.utc)
        sil = {"matchers": [{"name": "alertname", "value": "Noisy", "isRegex": False, "isEqual": True}],
               "startsAt": rfc3339(start), "endsAt": rfc3339(start + timedelta(hours=1)),
               "createdBy": "e2e", "comment": "maintenance"}
        status, body = self.server.request("POST", "/api/v2/silences", json.dumps(sil))
        self.assertEqual(status, 200, body)
        sid = json.loads(body)["silenceID"]
        self.post_alerts([alert("Noisy", "a"), alert("Quiet", "b")])
        got = self.wait_for(self.hook.take)
        time.sleep(3)
        got += self.hook.take()
        self.assertEqual([g["groupLabels"]["alertname"] for g in got], ["Quiet"])
        alerts = {a["labels"]["alertname"]: a for a in self.get("/api/v2/alerts")}
        self.assertEqual(alerts["Noisy"]["status"], {"state": "suppressed", "silencedBy": [sid], "inhibitedBy": []})
        self.assertEqual(alerts["Quiet"]["status"]["state"], "active")
        self.assertEqual(alerts["Quiet"]["receivers"], [{"name": "hook"}])
        active = self.get("/api/v2/alerts?active=true&silenced=false")
        self.assertEqual([a["labels"]["alertname"] for a in active], ["Quiet"])
        s = self.get("/api/v2/silence/" + sid)
        self.assertEqual(s["status"]["state"], "active")
        self.assertEqual(s["createdBy"], "e2e")
        groups = self.get("/api/v2/alerts/groups")
        self.assertEqual(sorted(g["labels"]["alertname"] for g in groups), ["Noisy", "Quiet"])
        self.assertEqual(self.get("/api/v2/receivers"),
                         [{"name": "hook"}, {"name": "hook-tls"}, {"name": "mail"}, {"name": "mail-cram"},
                          {"name": "mail-tls"}])
        st = self.get("/api/v2/status")
        self.assertEqual(st["cluster"]["status"], "disabled")
        self.assertIn("receivers:", st["config"]["original"])
        if os.path.exists(AMTOOL):
            url = "--alertmanager.url=http://127.0.0.1:%d" % self.server.port
            out = subprocess.run([AMTOOL, url, "silence", "query", "-q"], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(), [sid])
            out = subprocess.run([AMTOOL, url, "alert", "query", "alertname=Quiet", "-o", "json"],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual([a["labels"]["instance"] for a in json.loads(out.stdout)], ["b"])
            out = subprocess.run([AMTOOL, url, "silence", "add", "alertname=Other", "-c", "via amtool", "-a", "e2e"],
                                 capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(len(self.get("/api/v2/silences")), 2)
        # Expiring the silence lets the alert through at the next flush.
        status, body = self.server.request("DELETE", "/api/v2/silence/" + sid)
        self.assertEqual(status, 200, body)
        self.assertEqual(self.get("/api/v2/silence/" + sid)["status"]["state"], "expired")
        self.post_alerts([alert("Noisy", "a")])
        got = self.wait_for(self.hook.take)
        self.assertEqual([g["groupLabels"]["alertname"] for g in got], ["Noisy"])
        # Bad silences are rejected with the reason.
        bad = dict(sil, comment="")
        status, body = self.server.request("POST", "/api/v2/silences", json.dumps(bad))
        self.assertEqual(status, 400)
        self.assertIn("comment", json.loads(body))

    def test_inhibition_suppresses(self):
        self.post_alerts([alert("NodeDown", "n1", "critical"), alert("GpuSlow", "n1", "warning"),
                          alert("GpuSlow2", "n2", "warning")])
        got = self.wait_for(self.hook.take)
        time.sleep(3)
        got += self.hook.take()
        self.assertEqual(sorted(g["groupLabels"]["alertname"] for g in got), ["GpuSlow2", "NodeDown"])
        alerts = {a["labels"]["alertname"]: a for a in self.get("/api/v2/alerts")}
        self.assertEqual(alerts["GpuSlow"]["status"]["state"], "suppressed")
        self.assertEqual(len(alerts["GpuSlow"]["status"]["inhibitedBy"]), 1)

    def test_restart_repeats_nothing(self):
        start = datetime.now(timezone.utc)
        sil = {"matchers": [{"name": "alertname", "value": "Muted", "isRegex": False, "isEqual": True}],
               "startsAt": rfc3339(start), "endsAt": rfc3339(start + timedelta(hours=1)),
               "createdBy": "e2e", "comment": "kept across restarts"}
        status, body = self.server.request("POST", "/api/v2/silences", json.dumps(sil))
        self.assertEqual(status, 200, body)
        self.post_alerts([alert("Train", "r1"), alert("Train", "r2")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(len(got), 1)
        self.assertEqual(self.server.terminate(), 0)
        self.server.start()
        self.assertEqual(len(self.get("/api/v2/silences")), 1)
        # Prometheus re-sends the same alerts after our restart: nothing is repeated.
        for _ in range(3):
            self.post_alerts([alert("Train", "r1"), alert("Train", "r2"), alert("Muted", "x")])
            time.sleep(1.5)
        self.assertEqual(self.hook.take(), [])
        # A new alert in the group is still news.
        self.post_alerts([alert("Train", "r1"), alert("Train", "r2"), alert("Train", "r3")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(len(got), 1)
        self.assertEqual(len(got[0]["alerts"]), 3)

    def test_retries_are_recorded(self):
        self.hook.fail_next = 2
        self.post_alerts([alert("Flaky", "x")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(len(got), 1)

        # The receiver has the request before trainwatch has its answer, and
        # the attempt is recorded after that: wait for the third record.
        def flaky_history():
            hist = self.get("/api/v1/notifications?limit=10")
            self.assertEqual(hist["status"], "success")
            mine = [h for h in hist["data"] if h["groupKey"] == '{}:{alertname="Flaky"}']
            return mine if len(mine) >= 3 else None
        mine = self.wait_for(flaky_history)
        self.assertEqual([(h["attempt"], h["outcome"]) for h in mine], [(3, "success"), (2, "failed"), (1, "failed")])
        self.assertIn("500", mine[1]["error"])
        self.assertEqual(mine[0]["integration"], "webhook")
        self.assertEqual(mine[0]["alerts"], 1)
        self.assertEqual(mine[0]["status"], "firing")
        status, body = self.server.request("GET", "/metrics")
        text = body.decode()
        self.assertIn('trainwatch_notifications_total{integration="webhook"} 3', text)
        self.assertIn('trainwatch_notifications_failed_total{integration="webhook"} 2', text)
        status, body = self.server.request("GET", "/api/v1/notifications?limit=x")
        self.assertEqual(status, 400)

    @unittest.skipUnless(have_aiosmtpd(), "python3-aiosmtpd is not installed")
    def test_email_with_auth(self):
        self.post_alerts([alert("LossNaN", "rank0", "critical", team="mail")])
        msgs = self.wait_for(lambda: self.smtp.messages)
        self.assertEqual(len(msgs), 1)
        mail_from, rcpt, content = msgs[0]
        self.assertEqual(mail_from, "trainwatch@example.org")
        self.assertEqual(rcpt, ["oncall@example.org"])
        self.assertIn("Subject: [FIRING:1] LossNaN (rank0 critical mail)", content)
        self.assertIn("X-Group: LOSSNAN", content)
        self.assertIn("X-Custom: custom LossNaN\r\n", content)  # a define from the templates: file  # custom templates run on the Go template engine
        self.assertIn("To: oncall@example.org", content)
        self.assertIn("LossNaN on rank0 (firing)", content)  # the text part, from the template
        self.assertIn("instance = rank0", content)          # the HTML part lists the labels
        # As Alertmanager: the first mechanism the server lists (CRAM-MD5 LOGIN PLAIN) that the
        # config can do; without auth_secret that is LOGIN, with the password from auth_password_file.
        self.assertEqual(self.smtp.logins, [("LOGIN", True)])

    @unittest.skipUnless(have_aiosmtpd(), "needs python3-aiosmtpd")
    def test_email_cram_md5(self):
        self.post_alerts([alert("Cram", "x", team="cram")])
        msgs = self.wait_for(lambda: self.smtp.messages)
        self.assertEqual(msgs[0][1], ["cram@example.org"])
        self.assertEqual(self.smtp.logins, [("CRAM-MD5", True)])

    @unittest.skipUnless(have_aiosmtpd() and shutil.which("openssl"), "needs python3-aiosmtpd and openssl")
    def test_email_starttls(self):
        self.post_alerts([alert("Tls", "x", team="tls")])
        msgs = self.wait_for(lambda: self.smtp_tls.messages)
        self.assertEqual(msgs[0][1], ["tls@example.org"])
        self.assertIn("Subject: [FIRING:1] Tls (x warning tls)", msgs[0][2])

    @unittest.skipUnless(shutil.which("openssl"), "needs openssl")
    def test_webhook_over_https_with_server_name(self):
        # The certificate names localhost and the URL 127.0.0.1: only
        # tls_config.server_name makes the check pass (it was parsed and
        # dropped before the notifier used the shared HTTP client).
        self.post_alerts([alert("Https", "x", team="https")])
        bodies = self.wait_for(lambda: self.hook_tls.take())
        self.assertEqual(bodies[0]["receiver"], "hook-tls")
        self.assertEqual(bodies[0]["alerts"][0]["labels"]["alertname"], "Https")

    def test_bad_config_reload_keeps_previous(self):
        self.write_config("route:\n  receiver: hook\n  group_wait: 3x\nreceivers: [{name: hook}]\n")
        status, body = self.server.request("POST", "/-/reload")
        self.assertEqual(status, 500)
        self.assertIn("line 3", body.decode())
        self.assertIn("route.group_wait", body.decode())
        out = subprocess.run([twtest.BINARY, "check", "config", self.am_path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("FAILED: line 3: route.group_wait", out.stdout)
        if os.path.exists(AMTOOL):
            self.assertEqual(subprocess.run([AMTOOL, "check-config", self.am_path], capture_output=True).returncode, 1)
        # The previous config still routes to the webhook.
        self.post_alerts([alert("StillRouted", "x")])
        got = self.wait_for(self.hook.take)
        self.assertEqual(got[0]["groupLabels"], {"alertname": "StillRouted"})
        # A good file reloads: the new route (group_by instance) takes effect.
        self.write_config("route:\n  receiver: hook\n  group_by: [instance]\n  group_wait: 1s\n"
                          "receivers: [{name: hook, webhook_configs: [{url: 'http://127.0.0.1:%d/'}]}]\n" % self.hook.port)
        out = subprocess.run([twtest.BINARY, "check", "config", self.am_path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout)
        if os.path.exists(AMTOOL):
            self.assertEqual(subprocess.run([AMTOOL, "check-config", self.am_path], capture_output=True).returncode, 0)
        status, body = self.server.request("POST", "/-/reload")
        self.assertEqual(status, 200, body)
        self.post_alerts([alert("After", "y")])
        seen = []
        # (The earlier alert is regrouped too: its new group key is news, as in Alertmanager.)
        self.wait_for(lambda: seen.extend(self.hook.take()) or {"instance": "y"} in [g["groupLabels"] for g in seen])

    def test_bad_alerts_rejected(self):
        status, body = self.server.request("POST", "/api/v2/alerts", json.dumps([{"labels": {}}]))
        self.assertEqual(status, 400)
        self.assertIn("alert 0", json.loads(body))
        status, body = self.server.request("POST", "/api/v2/alerts", "{not json")
        self.assertEqual(status, 400)
        status, body = self.server.request("POST", "/api/v2/alerts",
                                           json.dumps([{"labels": {"a": "b"}, "startsAt": "yesterday"}]))
        self.assertEqual(status, 400)
        self.assertIn("startsAt", json.loads(body))
        self.assertEqual(self.get("/api/v2/alerts"), [])


    def test_run_alert_from_the_python_client_reaches_the_webhook(self):
        client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python")
        sys.path.insert(0, os.path.abspath(client))
        import trainwatch
        run = trainwatch.init(project="llm", name="sweep-3", url="http://127.0.0.1:%d" % self.server.port,
                              spool_dir=os.path.join(self.tmp, "spool"), capture_output=False,
                              install_hooks=False, flush_interval=0.05)
        try:
            run.alert("Loss diverged", "loss=nan at step 1200", level="error")
            got = self.wait_for(self.hook.take)
        finally:
            run.finish(timeout=10)
        self.assertEqual(len(got), 1)
        n = got[0]
        self.assertEqual(n["groupLabels"], {"alertname": "Loss diverged"})
        self.assertEqual(len(n["alerts"]), 1)
        a = n["alerts"][0]
        self.assertEqual(a["status"], "firing")
        self.assertEqual(a["labels"], {"alertname": "Loss diverged", "project": "llm", "run": "sweep-3",
                                       "severity": "error"})
        self.assertEqual(a["annotations"], {"summary": "Loss diverged", "description": "loss=nan at step 1200",
                                            "run_id": run.id})
        self.assertEqual(a["generatorURL"], "http://127.0.0.1:%d/runs/%s" % (
            self.server.port, urllib.parse.quote(run.id, safe="")))
        # Still kept with the run, as before.
        status, body = self.server.request("GET", "/api/v1/runs/" + urllib.parse.quote(run.id, safe=""))
        self.assertEqual(status, 200)
        self.assertEqual([al["title"] for al in json.loads(body)["data"]["alerts"]], ["Loss diverged"])


class RulesToNotifierTest(unittest.TestCase):
    """The rule evaluator's alerts reach the embedded notifier (wired in app/serve.cc)."""

    def test_rule_alert_fires_and_resolves_once(self):
        tmp = tempfile.mkdtemp(prefix="tw-notify-rules-")
        hook = Hook()
        with open(os.path.join(tmp, "rules.yml"), "w") as f:
            f.write("groups:\n- name: g\n  interval: 1s\n  rules:\n  - alert: LossHigh\n"
                    "    expr: training_loss > 1\n    for: 2s\n    labels: {severity: page}\n"
                    "    annotations: {summary: 'loss is {{ $value }} on {{ $labels.run }}'}\n")
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write("global: {evaluation_interval: 1s}\nrule_files: [rules.yml]\n")
        with open(os.path.join(tmp, "am.yml"), "w") as f:
            f.write("route: {receiver: hook, group_by: [alertname], group_wait: 1s, group_interval: 1s}\n"
                    "receivers: [{name: hook, webhook_configs: [{url: 'http://127.0.0.1:%d/'}]}]\n" % hook.port)
        server = twtest.Server(os.path.join(tmp, "data"), [
            "--config.file", os.path.join(tmp, "prometheus.yml"), "--alertmanager.config.file",
            os.path.join(tmp, "am.yml"), "--rules.default-pack=false", "--scrape.self=false"])
        try:
            server.start()

            def put(v):
                status, body = server.request("POST", "/api/v1/import/prometheus",
                                              'training_loss{run="r1"} %s %d\n' % (v, int(time.time() * 1000)))
                self.assertEqual(status, 204, body)

            put(5)
            seen = []
            deadline = time.time() + 30
            while time.time() < deadline and not seen:
                put(5)
                seen += hook.take()
                time.sleep(0.5)
            self.assertEqual(len(seen), 1, server.logs())
            n = seen[0]
            self.assertEqual(n["status"], "firing")
            self.assertEqual(n["alerts"][0]["labels"]["alertname"], "LossHigh")
            self.assertEqual(n["alerts"][0]["labels"]["severity"], "page")
            self.assertEqual(n["alerts"][0]["annotations"]["summary"], "loss is 5 on r1")
            for _ in range(6):  # still firing: nothing new
                put(5)
                time.sleep(0.5)
            self.assertEqual(hook.take(), [])
            resolved = []
            deadline = time.time() + 30
            while time.time() < deadline and not resolved:
                put(0.5)
                resolved += hook.take()
                time.sleep(0.5)
            self.assertEqual([r["status"] for r in resolved], ["resolved"], server.logs())
            time.sleep(3)
            self.assertEqual(hook.take(), [])
        finally:
            server.stop_quietly()
            hook.close()
            shutil.rmtree(tmp, ignore_errors=True)


class BuiltInConfigTest(unittest.TestCase):
    """Without --alertmanager.config.file (issue 19): the built-in record-only
    configuration, so alerts, silences and the notification history answer
    from the first start, and nothing is sent anywhere."""

    def test_without_config_silences_and_history_work(self):
        tmp = tempfile.mkdtemp(prefix="tw-notify-builtin-")
        server = twtest.Server(os.path.join(tmp, "data"), ["--rules.default-pack=false", "--scrape.self=false"])
        try:
            server.start()
            status, body = server.request("GET", "/api/v2/alerts")
            self.assertEqual((status, json.loads(body)), (200, []))
            status, body = server.request("GET", "/api/v2/status")
            self.assertEqual(status, 200, body)
            self.assertIn("record-only", json.loads(body)["config"]["original"])
            start = datetime.now(timezone.utc)
            sil = {"matchers": [{"name": "alertname", "value": "Noisy", "isRegex": False, "isEqual": True}],
                   "startsAt": rfc3339(start), "endsAt": rfc3339(start + timedelta(hours=1)),
                   "createdBy": "e2e", "comment": "maintenance"}
            status, body = server.request("POST", "/api/v2/silences", json.dumps(sil))
            self.assertEqual(status, 200, body)
            status, body = server.request("GET", "/api/v2/silences")
            self.assertEqual([s["status"]["state"] for s in json.loads(body)], ["active"])
            status, body = server.request("POST", "/api/v2/alerts", json.dumps([alert("Noisy", "a"), alert("Real", "b")]))
            self.assertEqual(status, 200, body)
            status, body = server.request("GET", "/api/v2/alerts")
            states = {a["labels"]["alertname"]: a["status"]["state"] for a in json.loads(body)}
            self.assertEqual(states, {"Noisy": "suppressed", "Real": "active"})
            status, body = server.request("GET", "/api/v1/notifications")
            self.assertEqual(status, 200, body)  # recorded after group_wait (30 s): NotifierTest covers the timing
        finally:
            server.stop_quietly()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
