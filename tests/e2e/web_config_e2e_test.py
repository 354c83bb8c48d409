#!/usr/bin/env python3
"""End-to-end test of --web.config.file (issue 18): TLS and basic auth in
Prometheus's web config format, on the real binary.

- every path of the route table (each string path in src/http/api*.cc,
  plus the UI's pages) answers 401 without credentials and with a wrong
  password, and something else with the right one; the configured headers
  come with every answer;
- Debian's Prometheus 2.42 loads the very same web config file, and
  remote-writes into trainwatch over TLS (CA made here with the openssl CLI,
  a client certificate too) with basic_auth; trainwatch's own self-scrape
  gets through; plain HTTP on the TLS port is told so;
- the Python client (clients/python) with credentials in the URL, in
  TRAINWATCH_USERNAME/TRAINWATCH_PASSWORD, and TRAINWATCH_CA_FILE;
- a bad file refuses the start (naming file, line, field); a bad file on
  SIGHUP or POST /-/reload is logged and the running config kept; a good one
  takes effect;
- --web.tokens.file: tokens made with `trainwatch token add`, each role on
  every route of the route table (401 without, 403 beyond its role), the
  Python client, the C++ client (`trainwatch demo`) and the CLIs with
  TRAINWATCH_TOKEN; the admin API only with --web.enable-admin-api.

Hashes are made with Python's crypt module (libxcrypt, bcrypt), or libcrypt
through ctypes where the module is gone. Loopback only; every process is
stopped by PID.

Usage: web_config_e2e_test.py /path/to/trainwatch [unittest args]
"""
import base64
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.parse
import warnings

import twtest
from twtest import Process, free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENT = os.path.join(ROOT, "clients", "python")
PROMETHEUS = "/usr/bin/prometheus"
USER, PASSWORD = "trainer", "correct horse battery"


def bcrypt(password, cost=4):
    """A bcrypt hash ($2b$) of `password`, as htpasswd -B would make (cost 4: fast tests)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        h = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << cost))
    except ImportError:  # Python >= 3.13: libxcrypt itself
        import ctypes
        lib = ctypes.CDLL("libcrypt.so.1")
        lib.crypt_gensalt.restype = ctypes.c_char_p
        lib.crypt.restype = ctypes.c_char_p
        h = lib.crypt(password.encode(), lib.crypt_gensalt(b"$2b$", cost, None, 0)).decode()
    assert h and h.startswith("$2"), h
    return h


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def request(port, method, path, auth=None, ca=None, body=None, headers=None, read=True, timeout=20):
    """(status, headers, body) of one request; over TLS when `ca` is given."""
    if ca:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                           context=ssl.create_default_context(cafile=ca))
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = dict(headers or {})
    if auth:
        h["Authorization"] = basic(*auth)
    try:
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        # Not read: a log tail streams for as long as the connection stays.
        data = resp.read() if read else b""
        return resp.status, resp.headers, data
    finally:
        conn.close()


def route_paths():
    """Every path the route table names (string literals of src/http/routes.cc
    and api*.cc, tests excluded), parameters filled in, plus paths under each
    prefix."""
    paths = set()
    http_dir = os.path.join(ROOT, "src", "http")
    for name in os.listdir(http_dir):
        if not (name.startswith("api") and name.endswith(".cc") or name == "routes.cc") or name.endswith("_test.cc"):
            continue
        with open(os.path.join(http_dir, name)) as f:
            for lit in re.findall(r'"(/[A-Za-z0-9_./:-]*)"', f.read()):
                paths.add(lit.replace(":name", "job").replace(":id", "run1"))
    for extra in ("/api/v1/label/job/values", "/api/v1/runs/run1", "/api/v1/runs/run1/metrics",
                  "/myindex/_bulk", "/api/v2/silence/abc", "/runs/run1", "/assets/app.js", "/no/such/page"):
        paths.add(extra)
    return sorted(paths)


class WebConfigE2ETest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="tw_webcfg_certs_")
        d = cls.certs

        def openssl(*args):
            r = subprocess.run(["openssl"] + list(args), cwd=d, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("openssl %s: %s" % (" ".join(args), r.stderr))

        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj",
                "/CN=trainwatch e2e CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                "keyUsage=critical,keyCertSign,cRLSign")
        for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
                          ("client", "subjectAltName=DNS:prometheus.client\nextendedKeyUsage=clientAuth\n")):
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext)
            openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")
        cls.ca = os.path.join(d, "ca.crt")
        cls.hash = bcrypt(PASSWORD)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certs, ignore_errors=True)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_webcfg_e2e_")
        self.procs = []

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers -------------------------------------------------------------
    def web_config(self, tls=True, users=None, extra=""):
        """Writes web.yml (certificate paths relative to it, as Prometheus resolves them): its path."""
        for f in ("ca.crt", "server.crt", "server.key"):
            shutil.copy(os.path.join(self.certs, f), os.path.join(self.tmp, f))
        text = ""
        if tls:
            text += textwrap.dedent("""\
                tls_server_config:
                  cert_file: server.crt
                  key_file: server.key
                  client_auth_type: VerifyClientCertIfGiven
                  client_ca_file: ca.crt
                  min_version: TLS12
                """)
        text += "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n"
        text += "basic_auth_users:\n"
        for user, h in (users or {USER: self.hash}).items():
            text += "  %s: %s\n" % (user, h)
        text += extra
        path = os.path.join(self.tmp, "web.yml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, web, config=None, tls=True, expect_exit=False):
        """trainwatch serve with `web`; waits until /-/ready answers 200 to the right credentials."""
        port = free_port()
        args = [twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--listen",
                "127.0.0.1:%d" % port, "--log.level", "info", "--collect.host=false", "--collect.gpu=false",
                "--web.config.file", web]
        if config:
            args += ["--config.file", config]
        p = Process(args, os.path.join(self.tmp, "tw-%d.log" % port))
        self.procs.append(p)
        p.port = port
        if expect_exit:
            try:
                p.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.fail("trainwatch started with a bad web config: " + p.logs())
            return p
        deadline = time.time() + 60
        while time.time() < deadline:
            if p.proc.poll() is not None:
                raise RuntimeError("trainwatch exited: " + p.logs())
            try:
                if request(port, "GET", "/-/ready", auth=(USER, PASSWORD), ca=self.ca if tls else None,
                           timeout=2)[0] == 200:
                    return p
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("trainwatch not ready: " + p.logs())

    def query(self, port, q, auth=(USER, PASSWORD)):
        status, _, body = request(port, "GET", "/api/v1/query?query=" + urllib.parse.quote(q), auth=auth, ca=self.ca)
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]["result"]

    def wait_for(self, what, fn, timeout=60, procs=()):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for p in procs:
                self.assertIsNone(p.proc.poll(), "%s exited: %s" % (p.proc.args[0], p.logs()))
            v = fn()
            if v:
                return v
            time.sleep(0.5)
        self.fail("%s not within %ds\n%s" % (what, timeout, "\n".join(p.logs() for p in procs)))

    # ---- tests ---------------------------------------------------------------
    def test_every_route_answers_401_without_credentials(self):
        tw = self.start(self.web_config())
        paths = route_paths()
        self.assertGreater(len(paths), 60, paths)
        for must in ("/metrics", "/federate", "/-/healthy", "/-/ready", "/api/v1/write", "/_bulk",
                     "/loki/api/v1/push", "/api/v2/alerts", "/api/v1/runs", "/api/v1/logs/tail", "/"):
            self.assertIn(must, paths)
        for path in paths:
            for method in ("GET", "POST"):
                for auth in (None, (USER, "wrong"), ("nobody", PASSWORD)):
                    status, headers, _ = request(tw.port, method, path, auth=auth, ca=self.ca, read=False)
                    self.assertEqual(status, 401, "%s %s with %r" % (method, path, auth))
                    self.assertEqual(headers.get("WWW-Authenticate"), "Basic", path)
                    self.assertEqual(headers.get("X-Frame-Options"), "deny", path)
                status, headers, _ = request(tw.port, method, path, auth=(USER, PASSWORD), ca=self.ca, read=False)
                self.assertNotEqual(status, 401, "%s %s with the right password" % (method, path))
                self.assertEqual(headers.get("X-Frame-Options"), "deny", path)
                self.assertEqual(headers.get("X-Content-Type-Options"), "nosniff", path)
        # Plain HTTP on the TLS port is told so.
        status, _, body = request(tw.port, "GET", "/-/healthy", auth=(USER, PASSWORD))
        self.assertEqual(status, 400)
        self.assertEqual(body, b"Client sent an HTTP request to an HTTPS server.\n")
        # A body is refused unread: the answer comes although it is never sent.
        status, _, _ = request(tw.port, "POST", "/api/v1/import/prometheus", ca=self.ca, read=False,
                               headers={"Content-Length": str(1 << 30)})
        self.assertEqual(status, 401)

    def test_basic_auth_without_tls(self):
        tw = self.start(self.web_config(tls=False), tls=False)
        self.assertEqual(request(tw.port, "GET", "/metrics")[0], 401)
        self.assertEqual(request(tw.port, "GET", "/metrics", auth=(USER, PASSWORD))[0], 200)

    @unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
    def test_real_prometheus_loads_the_file_and_remote_writes_with_basic_auth_and_tls(self):
        web = self.web_config()
        config = os.path.join(self.tmp, "trainwatch.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n")  # the self-scrape, every second
        tw = self.start(web, config=config)
        # The same web config file, unchanged, in Prometheus 2.42.
        prom_port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(textwrap.dedent("""\
                global:
                  scrape_interval: 1s
                scrape_configs:
                  - job_name: prometheus
                    scheme: https
                    basic_auth: {username: %s, password: '%s'}
                    tls_config: {ca_file: %s}
                    static_configs: [{targets: ['127.0.0.1:%d']}]
                remote_write:
                  - url: https://127.0.0.1:%d/api/v1/write
                    basic_auth:
                      username: %s
                      password: '%s'
                    tls_config:
                      ca_file: %s
                      cert_file: %s
                      key_file: %s
                    queue_config:
                      batch_send_deadline: 1s
                """ % (USER, PASSWORD, self.ca, prom_port, tw.port, USER, PASSWORD, self.ca,
                       os.path.join(self.certs, "client.crt"), os.path.join(self.certs, "client.key"))))
        prom = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                        "--web.listen-address=127.0.0.1:%d" % prom_port, "--web.config.file=" + web],
                       os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)

        def prom_ready():
            try:
                return request(prom_port, "GET", "/-/ready", auth=(USER, PASSWORD), ca=self.ca, timeout=2)[0] == 200
            except OSError:
                return False

        self.wait_for("prometheus ready with the web config", prom_ready, procs=[prom])
        self.assertEqual(request(prom_port, "GET", "/-/ready", ca=self.ca)[0], 401)  # Prometheus agrees
        # Prometheus's scrape of itself (with basic auth) reaches trainwatch by remote_write.
        res = self.wait_for("prometheus_build_info in trainwatch",
                            lambda: self.query(tw.port, 'prometheus_build_info{job="prometheus"}'), procs=[prom, tw])
        self.assertEqual(res[0]["metric"]["job"], "prometheus")
        self.assertNotIn("non-recoverable", prom.logs())
        # trainwatch's own self-scrape got through its TLS and authentication.
        up = self.wait_for("self-scrape up", lambda: [r for r in self.query(tw.port, 'up{job="trainwatch"}')
                                                      if r["value"][1] == "1"], procs=[tw])
        self.assertEqual(up[0]["metric"]["instance"], "127.0.0.1:%d" % tw.port)

    def test_python_client_with_credentials_and_ca_file(self):
        tw = self.start(self.web_config())
        script = textwrap.dedent("""\
            import sys
            sys.path.insert(0, %r)
            import trainwatch
            run = trainwatch.init(project="webcfg", id=sys.argv[2], url=sys.argv[1], spool_dir=sys.argv[3])
            for step in range(50):
                run.log({"loss": 1.0 / (step + 1)}, step=step)
            run.finish()
            print(trainwatch.Api(url=sys.argv[1]).run(sys.argv[2]).id)
            """ % CLIENT)
        path = os.path.join(self.tmp, "train.py")
        with open(path, "w") as f:
            f.write(script)
        base = "https://127.0.0.1:%d" % tw.port
        env = dict(os.environ, TRAINWATCH_CA_FILE=self.ca)
        env.pop("TRAINWATCH_USERNAME", None)
        env.pop("TRAINWATCH_PASSWORD", None)
        userinfo = "https://%s:%s@127.0.0.1:%d" % (USER, urllib.parse.quote(PASSWORD, safe=""), tw.port)
        cases = [("in-url", userinfo, env),
                 ("in-env", base, dict(env, TRAINWATCH_USERNAME=USER, TRAINWATCH_PASSWORD=PASSWORD))]
        for run_id, url, e in cases:
            r = subprocess.run([sys.executable, path, url, run_id, os.path.join(self.tmp, "spool-" + run_id)],
                               env=e, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), run_id, r.stderr)
            self.assertNotIn(PASSWORD, r.stderr)  # never printed
            status, _, body = request(tw.port, "GET", "/api/v1/runs/" + run_id, auth=(USER, PASSWORD), ca=self.ca)
            self.assertEqual(status, 200, body)
            doc = json.loads(body)["data"]
            self.assertEqual(doc["status"], "finished", doc)
        # A wrong password: init fails loudly instead of logging into the void.
        bad = "https://%s:wrong@127.0.0.1:%d" % (USER, tw.port)
        r = subprocess.run([sys.executable, path, bad, "bad", os.path.join(self.tmp, "spool-bad")], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("401", r.stderr)
        self.assertNotIn("wrong@", r.stderr)
        # Without the CA the server's certificate is not trusted.
        r = subprocess.run([sys.executable, path, userinfo, "noca", os.path.join(self.tmp, "spool-noca")],
                           env={k: v for k, v in env.items() if k != "TRAINWATCH_CA_FILE"},
                           capture_output=True, text=True, timeout=120)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", r.stderr)

    def test_bad_file_refuses_to_start(self):
        cases = [
            ("basic_auth_users:\n  alice: plaintext\n",
             "line 2: basic_auth_users.alice: not a bcrypt hash"),
            ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
             "line 2: tls_server_config.cert_file: open %s/missing.crt: No such file or directory" % self.tmp),
            ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS14\n",
             "line 4: tls_server_config.min_version: unknown TLS version \"TLS14\""),
            ("http_server_config:\n  headers:\n    Server: trainwatch\n",
             "line 3: http_server_config.headers: HTTP header \"Server\" can not be configured"),
            ("auth_excluded_paths: [/metrics]\n",
             "line 1: auth_excluded_paths: not supported by trainwatch"),
        ]
        for text, want in cases:
            path = self.web_config()  # copies the certificates
            with open(path, "w") as f:
                f.write(text)
            p = self.start(path, expect_exit=True)
            self.assertNotEqual(p.proc.returncode, 0)
            self.assertIn("web config file %s: %s" % (path, want), p.logs())
        p = self.start(os.path.join(self.tmp, "absent.yml"), expect_exit=True)
        self.assertNotEqual(p.proc.returncode, 0)
        self.assertIn("web config file %s/absent.yml: open" % self.tmp, p.logs())

    def test_reload_keeps_the_running_config_when_the_file_is_bad(self):
        web = self.web_config()
        tw = self.start(web)
        with open(web) as f:
            good = f.read()
        # SIGHUP with a bad file: logged, the old password still works.
        with open(web, "w") as f:
            f.write(good.replace(self.hash, "not-a-hash"))
        os.kill(tw.proc.pid, signal.SIGHUP)
        self.wait_for("the reload error in the log", lambda: "reload on SIGHUP: web config file " + web in tw.logs(),
                      procs=[tw])
        self.assertIn("basic_auth_users.%s: not a bcrypt hash" % USER, tw.logs())
        self.assertEqual(request(tw.port, "GET", "/-/healthy", auth=(USER, PASSWORD), ca=self.ca)[0], 200)
        # POST /-/reload says why, and keeps it too.
        status, _, body = request(tw.port, "POST", "/-/reload", auth=(USER, PASSWORD), ca=self.ca)
        self.assertEqual(status, 500)
        self.assertIn(b"not a bcrypt hash", body)
        # A file that would turn TLS off needs a restart.
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  %s: %s\n" % (USER, self.hash))
        status, _, body = request(tw.port, "POST", "/-/reload", auth=(USER, PASSWORD), ca=self.ca)
        self.assertEqual(status, 500)
        self.assertIn(b"turns TLS off, which needs a restart", body)
        # A good new file: a new user and password, at once.
        with open(web, "w") as f:
            f.write(good.replace("%s: %s" % (USER, self.hash), "ops: %s" % bcrypt("n3w pass")))
        os.kill(tw.proc.pid, signal.SIGHUP)
        self.wait_for("the new user", lambda: request(tw.port, "GET", "/-/healthy", auth=("ops", "n3w pass"),
                                                      ca=self.ca)[0] == 200, procs=[tw])
        self.assertEqual(request(tw.port, "GET", "/-/healthy", auth=(USER, PASSWORD), ca=self.ca)[0], 401)


    def test_tokens_with_roles_on_every_route_and_every_client(self):
        tokens_file = os.path.join(self.tmp, "tokens.yml")
        tok = {}
        for name, role in (("dash", "read"), ("jobs", "write"), ("ops", "admin")):
            r = subprocess.run([twtest.BINARY, "token", "add", "--file", tokens_file, "--name", name, "--role", role],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            tok[role] = r.stdout.strip()
            self.assertRegex(tok[role], r"^tw_[0-9a-f]{48}$")
        with open(tokens_file) as f:
            text = f.read()
        for t in tok.values():
            self.assertNotIn(t, text)  # hashes only
        port = free_port()
        p = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "data"), "--listen",
                     "127.0.0.1:%d" % port, "--collect.host=false", "--collect.gpu=false", "--web.tokens.file",
                     tokens_file, "--web.enable-admin-api"], os.path.join(self.tmp, "tw-tokens.log"))
        self.procs.append(p)

        def call(method, path, token=None, body=None):
            h = {"Authorization": "Bearer " + token} if token else {}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            try:
                conn.request(method, path, body=body, headers=h)
                resp = conn.getresponse()
                return resp.status, resp.headers, (resp.read() if path != "/api/v1/logs/tail" else b"")
            finally:
                conn.close()

        self.wait_for("ready", lambda: self._ready(call, tok["read"]), procs=[p])
        # Every route: 401 without a token (or with an unknown one), 403 beyond the token's role.
        writes = {"/api/v1/write", "/api/v1/import/prometheus", "/_bulk", "/loki/api/v1/push", "/api/v1/logs",
                  "/api/v1/runs", "/api/v2/alerts", "/api/v2/silences"}
        for path in route_paths():
            for method in ("GET", "POST"):
                for token in (None, "tw_" + "0" * 48):
                    status, headers, _ = call(method, path, token)
                    self.assertEqual(status, 401, "%s %s" % (method, path))
                    self.assertEqual(headers.get("WWW-Authenticate"), 'Bearer realm="trainwatch"')
                admin = path.startswith("/api/v1/admin/") or path == "/-/reload"
                status, _, body = call(method, path, tok["read"])
                if admin or (method == "POST" and path in writes):
                    self.assertEqual(status, 403, "%s %s with a read token: %r" % (method, path, body))
                    self.assertIn(b"has role read", body)
                elif method == "GET":
                    self.assertNotIn(status, (401, 403), "GET %s with a read token" % path)
                status, _, body = call(method, path, tok["write"])
                if admin:
                    self.assertEqual(status, 403, "%s %s with a write token" % (method, path))
                    self.assertIn(b"needs admin", body)
                elif method == "POST" and path in writes:
                    self.assertNotIn(status, (401, 403), "POST %s with a write token: %r" % (path, body))
        status, _, body = call("POST", "/api/v1/admin/tsdb/flush", tok["admin"])
        self.assertEqual(status, 204, body)
        status, _, body = call("POST", "/api/v1/import/prometheus", tok["write"], b"tok_metric 1\n")
        self.assertEqual(status, 204, body)

        url = "http://127.0.0.1:%d" % port
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINWATCH_")}
        # The Python client with TRAINWATCH_TOKEN.
        script = os.path.join(self.tmp, "train_tok.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import sys
                sys.path.insert(0, %r)
                import trainwatch
                run = trainwatch.init(project="tok", id="tokrun", url=sys.argv[1], spool_dir=sys.argv[2])
                for step in range(30):
                    run.log({"loss": 1.0 / (step + 1)}, step=step)
                run.finish()
                print(len(trainwatch.Api(url=sys.argv[1]).run("tokrun").history(keys=["loss"], pandas=False)))
                """ % CLIENT))
        r = subprocess.run([sys.executable, script, url, os.path.join(self.tmp, "spool-tok")],
                           env=dict(env, TRAINWATCH_TOKEN=tok["write"]), capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "30", r.stderr)
        self.assertNotIn(tok["write"], r.stderr)
        # The C++ client (trainwatch demo) with TRAINWATCH_TOKEN.
        r = subprocess.run([twtest.BINARY, "demo", "--url", url, "--steps", "20", "--rate", "200", "--runs", "1",
                            "--baseline", "false", "--spool-dir", os.path.join(self.tmp, "spool-demo")],
                           env=dict(env, TRAINWATCH_TOKEN=tok["write"]), capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("finished", r.stdout)
        status, _, body = call("GET", "/api/v1/runs?filter=" + urllib.parse.quote('project = "demo"'), tok["read"])
        self.assertEqual(status, 200, body)
        self.assertTrue(any(x["status"] == "finished" for x in json.loads(body)["data"]), body)
        # The CLIs: the query with a read token; without one, the 401 is said.
        r = subprocess.run([twtest.BINARY, "query", "--server", url, "tok_metric"],
                           env=dict(env, TRAINWATCH_TOKEN=tok["read"]), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tok_metric", r.stdout)
        r = subprocess.run([twtest.BINARY, "query", "--server", url, "tok_metric"], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("401", r.stderr)
        r = subprocess.run([twtest.BINARY, "export", "run", "tokrun", "--url", url, "--out", self.tmp],
                           env=dict(env, TRAINWATCH_TOKEN=tok["read"]), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "tokrun.csv")))
        # A token taken away on reload stops working at once.
        with open(tokens_file, "w") as f:
            f.write("tokens: []\n")
        status, _, body = call("POST", "/-/reload", tok["admin"])
        self.assertEqual(status, 200, body)
        self.assertEqual(call("GET", "/api/v1/labels", tok["read"])[0], 401)

    def _ready(self, call, token):
        try:
            return call("GET", "/-/ready", token)[0] == 200
        except OSError:
            return False

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: web_config_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = sys.argv.pop(1)
    unittest.main()
