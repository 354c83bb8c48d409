#!/usr/bin/env python3
"""Notification templates beside Debian's Alertmanager 0.25.

Usage: notify_templates_e2e_test.py /path/to/trainwatch [unittest args]

- `trainwatch template render` and the real `amtool template render` render
  the same texts against the same template data files: the default templates,
  Slack templates of the kind people copy from blogs (range .Alerts.Firing,
  .CommonLabels.SortedPairs, {{ define }} files), every template.KV /
  template.Alerts method and Alertmanager function, html escaping, and the
  error texts. Output must be identical byte for byte.
- The real alertmanager (/usr/bin/prometheus-alertmanager) and `trainwatch
  serve --alertmanager.config.file`, given the same alertmanager.yml (Slack,
  PagerDuty and webhook receivers pointing at one loopback HTTP server, a
  `templates:` file), get the same alerts through /api/v2/alerts; the Slack,
  PagerDuty and webhook bodies each one posts must be equal.

Both are started and stopped by PID; everything listens on 127.0.0.1.
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
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402

AMTOOL = "/usr/bin/amtool"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
# Debian's amtool does not embed the default templates; the package ships them here.
AM_DEFAULTS = "/usr/share/prometheus/alertmanager/default.tmpl"
AM_EMAIL = "/usr/share/prometheus/alertmanager/email.tmpl"

# Slack templates in the shape blog posts and runbooks show (define blocks in
# a templates: file, range over .Alerts.Firing, .SortedPairs, nested templates).
CUSTOM_TMPL = r"""
{{ define "slack.ml.title" -}}
[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}] {{ .CommonLabels.alertname }} for {{ .CommonLabels.job }}
{{- end }}

{{ define "slack.ml.text" }}
{{ range .Alerts.Firing }}
*Alert:* {{ .Annotations.summary }} - `{{ .Labels.severity }}`
*Description:* {{ .Annotations.description }}
*Details:*
  {{ range .Labels.SortedPairs }} • *{{ .Name }}:* `{{ .Value }}`
  {{ end }}
{{ end }}
{{ if gt (len .Alerts.Resolved) 0 }}Resolved: {{ range .Alerts.Resolved }}{{ .Labels.gpu }} {{ end }}{{ end }}
{{ end }}

{{ define "ml.summary" -}}
  {{- if .CommonAnnotations.summary -}}
    {{- .CommonAnnotations.summary -}}
  {{- else -}}
    {{- with index .Alerts 0 -}}{{- .Annotations.summary -}}{{- end -}}
  {{- end -}}
{{- end -}}

{{ define "ml.color" }}{{ if eq .Status "firing" }}{{ if eq .CommonLabels.severity "page" }}danger{{ else }}warning{{ end }}{{ else }}good{{ end }}{{ end }}

{{ define "ml.runbook" }}https://runbooks.example/{{ .CommonLabels.alertname | toLower }}?run={{ .CommonLabels.run | urlquery }}{{ end }}

{{ define "ml.labels" }}{{ range $k, $v := .CommonLabels.Remove (stringSlice "alertname" "severity") }}{{ $k }}={{ $v }} {{ end }}{{ end }}
"""

# (text, type) pairs rendered by both; errors are compared too.
TEXTS = [
    '{{ template "__subject" . }}',
    '{{ template "slack.default.title" . }}',
    '{{ template "slack.default.fallback" . }}',
    '{{ template "slack.default.titlelink" . }}',
    '{{ template "slack.default.username" . }}|{{ template "slack.default.text" . }}|{{ template "slack.default.pretext" . }}',
    '{{ template "pagerduty.default.description" . }}',
    '{{ template "pagerduty.default.instances" .Alerts.Firing }}',
    '{{ template "pagerduty.default.instances" .Alerts.Resolved }}',
    '{{ template "__text_alert_list" .Alerts }}',
    '{{ template "__alertmanagerURL" . }}',
    '{{ template "email.default.subject" . }}',
    '{{ template "slack.ml.title" . }}',
    '{{ template "slack.ml.text" . }}',
    '{{ template "ml.summary" . }}|{{ template "ml.color" . }}|{{ template "ml.runbook" . }}|{{ template "ml.labels" . }}',
    '{{ range .Alerts }}{{ .Status }} {{ .Labels.alertname }} {{ .StartsAt }} {{ .EndsAt }} {{ .Fingerprint }}\n{{ end }}',
    '{{ range .Alerts }}{{ .StartsAt.Format "2006-01-02 15:04:05" }} {{ .StartsAt.Unix }} {{ .EndsAt.IsZero }}\n{{ end }}',
    '{{ .CommonLabels.SortedPairs }}|{{ .CommonLabels.Names }}|{{ .CommonLabels.Values }}|{{ .GroupLabels.SortedPairs.Names }}',
    '{{ .CommonLabels.Remove .GroupLabels.Names }}|{{ (.CommonLabels.Remove .GroupLabels.Names).Values | join ", " }}',
    '{{ .CommonLabels }}|{{ .CommonAnnotations }}|{{ .GroupLabels.alertname }}|{{ .CommonLabels.missing }}|',
    '{{ len .Alerts }} {{ .Alerts.Firing | len }} {{ len .Alerts.Resolved }} {{ index .Alerts 0 }}',
    '{{ . }}',
    '{{ printf "%+v" (index .Alerts 0).Labels.SortedPairs }}|{{ printf "%v %q %s" .Status .Receiver .ExternalURL }}',
    '{{ .Receiver }} {{ .Status }} {{ .ExternalURL }}',
    '{{ toUpper "abc" }} {{ toLower "ABC" }} {{ title "hELLO wORLD foo-bar it\'s o\'neil 3dx x.y" }}',
    '{{ join "," (stringSlice "a" "b" "c") }} {{ stringSlice }} {{ match "^Gpu" .CommonLabels.alertname }}',
    '{{ reReplaceAll "(\\\\w+)-(\\\\d+)" "$2/$1" "node-12 host-7" }} {{ safeHtml "<b>" }}',
    '{{ with .Alerts.Firing }}{{ range $i, $a := . }}{{ $i }}:{{ $a.Labels.gpu }} {{ end }}{{ else }}none{{ end }}',
    '{{ range .CommonLabels.SortedPairs }}{{ if eq .Name "severity" }}{{ break }}{{ end }}{{ .Name }} {{ end }}',
    '{{ if and .Alerts.Firing (gt (len .Alerts.Firing) 1) }}many{{ else if .Alerts.Firing }}one{{ else }}none{{ end }}',
    # Errors: Go's texts, positions included.
    '{{ .Missing }}',
    '{{ .Alerts.Firing.Firing }}',
    '{{ .Alerts.Firing 1 }}',
    '{{ .CommonLabels.Remove }}',
    '{{ .CommonLabels.Remove "x" }}',
    '{{ .CommonLabels.SortedPairs.Foo }}',
    '{{ .Status.Foo }}',
    '{{ humanize 1 }}',
    '{{ template "nope" . }}',
    '{{ join "," .Status }}',
    '{{ if }}',
    '{{ .Alerts | len | printf "%d alerts" }}',
]
HTML_TEXTS = [
    '<p>{{ .CommonAnnotations.summary }}</p>{{ range .Alerts }}<a href="{{ .GeneratorURL }}">{{ .Labels.gpu }}</a>{{ end }}',
    '{{ safeHtml "<br>" }}{{ template "__subject" . }}',
]


def at(dt):
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


T0 = datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=timezone.utc)


def data_files():
    """Template data as Alertmanager builds it (firing alerts have the zero EndsAt)."""
    zero = "0001-01-01T00:00:00Z"

    def a(status, gpu, summary, ends=zero, **extra):
        labels = dict(alertname="GpuHot", job="train", run="r 1&2", severity="page", gpu=gpu, **extra)
        return {"status": status, "labels": labels,
                "annotations": {"summary": summary, "description": "GPU %s <over> 90C & rising" % gpu},
                "startsAt": at(T0 + timedelta(minutes=int(gpu))), "endsAt": ends,
                "generatorURL": "http://tw:9800/graph?g0.expr=DCGM_FI_DEV_GPU_TEMP+%3E+90&g0.tab=1",
                "fingerprint": "%016x" % (0xfeed0000 + int(gpu))}

    mixed = {"receiver": "team-ml", "status": "firing", "externalURL": "http://am.example:9093",
             "alerts": [a("firing", "0", "GPU 0 hot"), a("firing", "1", "GPU 1 hot", rack="r7"),
                        a("resolved", "2", "GPU 2 cooled", ends=at(T0 + timedelta(hours=1)))],
             "groupLabels": {"alertname": "GpuHot"},
             "commonLabels": {"alertname": "GpuHot", "job": "train", "run": "r 1&2", "severity": "page"},
             "commonAnnotations": {}}
    resolved = {"receiver": "ops", "status": "resolved", "externalURL": "http://am.example:9093",
                "alerts": [a("resolved", "3", "GPU 3 cooled", ends=at(T0 + timedelta(hours=2)))],
                "groupLabels": {"alertname": "GpuHot", "job": "train"},
                "commonLabels": dict(a("resolved", "3", "")["labels"]),
                "commonAnnotations": {"summary": "GPU 3 cooled", "description": "GPU 3 <over> 90C & rising"}}
    return {"mixed": mixed, "resolved": resolved}


class Sink:
    """One loopback HTTP server for every receiver of both notifiers: bodies by path."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = {}
        sink = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with sink.lock:
                    sink.bodies.setdefault(self.path, []).append(json.loads(body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def get(self, path):
        with self.lock:
            return list(self.bodies.get(path, []))

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


AM_CONFIG = """
global:
  resolve_timeout: 1h
  slack_api_url: 'http://127.0.0.1:{port}/{who}/slack-default'
templates: ['custom.tmpl']
route:
  receiver: team.ml
  group_by: [alertname]
  # 3 s: both alerts of one POST in the first notification even on a loaded
  # machine (the real Alertmanager once flushed after the first alone).
  group_wait: 3s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: team.ml
    slack_configs:
      - channel: '#ml'
        api_url: 'http://127.0.0.1:{port}/{who}/slack'
        send_resolved: true
        title: '{{{{ template "slack.ml.title" . }}}}'
        title_link: '{{{{ template "ml.runbook" . }}}}'
        text: '{{{{ template "slack.ml.text" . }}}}'
        color: '{{{{ template "ml.color" . }}}}'
        pretext: '{{{{ template "ml.summary" . }}}}'
        footer: '{{{{ template "ml.labels" . }}}}'
      - channel: '#defaults'
    pagerduty_configs:
      - routing_key: rk-123
        url: 'http://127.0.0.1:{port}/{who}/pd'
        details:
          run: '{{{{ .CommonLabels.run }}}}'
    webhook_configs:
      - url: 'http://127.0.0.1:{port}/{who}/hook'
"""


class TemplateRenderTest(unittest.TestCase):
    """`trainwatch template render` against `amtool template render` (Debian's 0.25)."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(AMTOOL) or not os.path.exists(AM_DEFAULTS):
            raise unittest.SkipTest("%s or %s is missing" % (AMTOOL, AM_DEFAULTS))
        cls.tmp = tempfile.mkdtemp(prefix="tw-tmpl-")
        cls.custom = os.path.join(cls.tmp, "custom.tmpl")
        with open(cls.custom, "w") as f:
            f.write(CUSTOM_TMPL)
        cls.data = {}
        for name, d in data_files().items():
            cls.data[name] = os.path.join(cls.tmp, name + ".json")
            with open(cls.data[name], "w") as f:
                json.dump(d, f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def render(self, argv, prefix):
        p = subprocess.run(argv, capture_output=True, timeout=30)
        err = p.stderr.decode()
        if p.returncode == 0:
            return 0, p.stdout.decode()
        self.assertTrue(err.startswith(prefix), err)
        return p.returncode, err[len(prefix):].rstrip("\n")

    def compare(self, text, kind, data):
        am = self.render([AMTOOL, "template", "render", "--template.glob=" + AM_DEFAULTS,
                          "--template.glob=" + AM_EMAIL, "--template.glob=" + self.custom, "--template.data=" + data,
                          "--template.type=" + kind, "--template.text=" + text], "amtool: error: ")
        tw = self.render([twtest.BINARY, "template", "render", "--template.glob=" + self.custom,
                          "--template.data=" + data, "--template.type=" + kind, "--template.text=" + text],
                         "trainwatch: error: ")
        self.assertEqual(tw, am, "%s template %r on %s" % (kind, text, os.path.basename(data)))
        return am

    def test_texts_render_as_amtool(self):
        errors = 0
        for name, data in sorted(self.data.items()):
            for text in TEXTS:
                with self.subTest(data=name, text=text):
                    rc, _ = self.compare(text, "text", data)
                    errors += rc != 0
            for text in HTML_TEXTS:
                with self.subTest(data=name, html=text):
                    self.compare(text, "html", data)
        # The error cases really fail (and were compared as errors).
        self.assertGreaterEqual(errors, 2 * 11)

    def test_template_file_errors_match(self):
        bad = os.path.join(self.tmp, "bad.tmpl")
        with open(bad, "w") as f:
            f.write('{{ define "x" }}\n{{ .Foo }\n')
        am = self.render([AMTOOL, "template", "render", "--template.glob=" + AM_DEFAULTS, "--template.glob=" + bad,
                          "--template.data=" + self.data["mixed"], "--template.text=x"], "amtool: error: ")
        tw = self.render([twtest.BINARY, "template", "render", "--template.glob=" + bad,
                          "--template.data=" + self.data["mixed"], "--template.text=x"], "trainwatch: error: ")
        self.assertEqual(tw, am)
        self.assertEqual(am[0], 1)


    def test_check_config_parses_templates_as_amtool(self):
        d = os.path.join(self.tmp, "check")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "good.tmpl"), "w") as f:
            f.write(CUSTOM_TMPL)
        with open(os.path.join(d, "bad.tmpl"), "w") as f:
            f.write('{{ define "x" }}{{ range .Alerts }}\n')
        for name, templates in [("ok.yml", "['good.tmpl', 'none-*.tmpl']"), ("bad.yml", "['*.tmpl']")]:
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write("route: {receiver: r}\nreceivers: [{name: r}]\ntemplates: %s\n" % templates)
            am = subprocess.run([AMTOOL, "check-config", path], capture_output=True, timeout=30)
            tw = subprocess.run([twtest.BINARY, "check", "config", path], capture_output=True, timeout=30)
            self.assertEqual(tw.returncode, am.returncode, name)
            self.assertEqual(tw.stdout.decode(), am.stdout.decode(), name)


class RealAlertmanagerTest(unittest.TestCase):
    """The same config and alerts to the real alertmanager and to trainwatch: equal bodies."""

    maxDiff = None

    def setUp(self):
        if not os.path.exists(ALERTMANAGER):
            self.skipTest("%s is missing" % ALERTMANAGER)
        self.tmp = tempfile.mkdtemp(prefix="tw-am-")
        self.sink = Sink()
        self.am = self.tw = None
        for who in ("am", "tw"):
            d = os.path.join(self.tmp, who)
            os.makedirs(d)
            with open(os.path.join(d, "alertmanager.yml"), "w") as f:
                f.write(AM_CONFIG.format(port=self.sink.port, who=who))
            with open(os.path.join(d, "custom.tmpl"), "w") as f:
                f.write(CUSTOM_TMPL)
        self.external = "http://am.example:9093"

    def tearDown(self):
        if self.am:
            self.am.stop()
        if self.tw:
            self.tw.stop_quietly()
        self.sink.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def post(self, port, alerts):
        status, body = twtest.request(port, "POST", "/api/v2/alerts", json.dumps(alerts),
                                      {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)

    def wait_for(self, path, n, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.sink.get(path)
            if len(got) >= n:
                return got
            time.sleep(0.1)
        self.fail("no %d bodies at %s (have %r)\nalertmanager: %s\ntrainwatch: %s" % (
            n, path, self.sink.get(path), self.am.logs(), self.tw.logs()))

    def test_slack_pagerduty_webhook_bodies_equal(self):
        am_port = twtest.free_port()
        self.am = twtest.Process(
            [ALERTMANAGER, "--config.file=" + os.path.join(self.tmp, "am", "alertmanager.yml"),
             "--storage.path=" + os.path.join(self.tmp, "am", "data"), "--web.listen-address=127.0.0.1:%d" % am_port,
             "--cluster.listen-address=", "--web.external-url=" + self.external],
            os.path.join(self.tmp, "alertmanager.log")).wait_ready(am_port)
        self.tw = twtest.Server(os.path.join(self.tmp, "tw", "data"), extra_args=[
            "--alertmanager.config.file", os.path.join(self.tmp, "tw", "alertmanager.yml"),
            "--rules.default-pack=false", "--scrape.self=false", "--web.external-url=" + self.external]).start()
        now = datetime.now(timezone.utc).replace(microsecond=0)

        def alert(gpu, **extra):
            return {"labels": dict(alertname="GpuHot", job="train", run="r 1&2", severity="page", gpu=gpu, **extra),
                    "annotations": {"summary": "GPU %s hot" % gpu, "description": "GPU %s <over> 90C & rising" % gpu},
                    "startsAt": at(now - timedelta(minutes=5 - int(gpu))),
                    "generatorURL": "http://tw:9800/graph?g0.expr=DCGM_FI_DEV_GPU_TEMP+%3E+90&g0.tab=1"}

        firing = [alert("0"), alert("1", rack="r7")]
        self.post(am_port, firing)
        self.post(self.tw.port, firing)
        # On a loaded machine either side may flush the group once before it
        # holds both alerts (the real Alertmanager has, despite group_wait);
        # the group's next notification then has both. Compared: the first
        # body that holds both alerts.
        def with_both(path):
            deadline = time.time() + 30
            while time.time() < deadline:
                for i, body in enumerate(self.sink.get(path)):
                    text = json.dumps(body)
                    if "FIRING:2" in text or ("GPU 1 hot" in text and "GPU 0 hot" in text):
                        return i, body
                time.sleep(0.1)
            self.fail("no body with both alerts at %s (have %r)" % (path, self.sink.get(path)))

        paths = ["/%s/slack", "/%s/slack-default", "/%s/pd", "/%s/hook"]
        seen = {}
        for p in paths:
            (ia, am), (it, tw) = with_both(p % "am"), with_both(p % "tw")
            seen[p] = (ia, it)
            self.assertEqual(tw, am, p % "*")
        # Resolve one: the next notification carries one firing and one resolved alert.
        resolved = dict(alert("0"), endsAt=at(now))
        self.post(am_port, [resolved])
        self.post(self.tw.port, [resolved])
        for p in ["/%s/slack", "/%s/pd", "/%s/hook"]:
            ia, it = seen[p]
            am, tw = self.wait_for(p % "am", ia + 2)[ia + 1], self.wait_for(p % "tw", it + 2)[it + 1]
            self.assertEqual(tw, am, p % "*")
        # send_resolved is false there: nothing more after the firing one.
        time.sleep(1.5)
        ia, it = seen["/%s/slack-default"]
        self.assertEqual(len(self.sink.get("/tw/slack-default")), it + 1)
        self.assertEqual(len(self.sink.get("/am/slack-default")), ia + 1)


if __name__ == "__main__":
    twtest.BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
