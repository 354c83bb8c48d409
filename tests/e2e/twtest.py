"""Shared helpers for the end-to-end tests: a free loopback port and one
trainwatch process on a data dir (python3 standard library only).

Tests set twtest.BINARY (the trainwatch binary under test) before starting
a Server.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import time

BINARY = None


def request(port, method, path, body=None, headers=None, timeout=10):
    """One HTTP request to 127.0.0.1:port: (status, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class Process:
    """Any real program under test (trainwatch, prometheus, an exporter),
    its output in a log file; stopped by PID with SIGTERM, then SIGKILL."""

    def __init__(self, argv, log_path):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, port, path="/-/ready", timeout=60):
        """Polls http://127.0.0.1:port/path until 200; raises with the log if the process exits or time runs out."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited: %s" % (self.proc.args[0], self.logs()))
            try:
                if request(port, "GET", path, timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("%s not ready within %ds: %s" % (self.proc.args[0], timeout, self.logs()))

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    def logs(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-int(os.environ.get("TW_TEST_LOG_TAIL", "4000")):]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One trainwatch process on a data dir."""

    def __init__(self, data_dir, extra_args=(), port=None, collect=False):
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        if not collect:
            # The built-in host/GPU collectors (on by default in serve) would add
            # node_*/DCGM_* series to what these tests compare; collect_e2e_test.py turns them on.
            self.extra_args = ["--collect.host=false", "--collect.gpu=false"] + self.extra_args
        self.proc = None
        self.port = port  # None: a free one at each start
        self.fixed_port = port is not None
        self.log = None
        self.log_path = os.path.join(os.path.dirname(data_dir), "server-%d.log" % int(time.time() * 1000))

    def start(self, timeout=60):
        for _ in range(3):  # the free port may be taken between probe and bind
            if not self.fixed_port:
                self.port = free_port()
            if self.log is None:
                self.log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [BINARY, "serve", "--data-dir", self.data_dir, "--listen", "127.0.0.1:%d" % self.port,
                 "--log.level", "info"] + self.extra_args,
                stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.time() + timeout
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    status, body = self.request("GET", "/-/ready", timeout=2)
                    if status == 200:
                        return self
                except OSError:
                    pass
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("server not ready within %ds: %s" % (timeout, self.logs()))
        raise RuntimeError("server exited at start: %s" % self.logs())

    def logs(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-int(os.environ.get("TW_TEST_LOG_TAIL", "4000")):]
        except OSError:
            return ""

    def request(self, method, path, body=None, headers=None, timeout=30):
        return request(self.port, method, path, body, headers, timeout)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout=60):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop_quietly(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None

    def export(self, selector):
        from urllib.parse import quote
        status, body = self.request("GET", "/api/v1/export?match[]=" + quote(selector), timeout=120)
        if status != 200:
            raise AssertionError("export: %d %r" % (status, body[:500]))
        out = {}
        for line in body.decode().splitlines():
            if not line:
                continue
            obj = json.loads(line)
            key = tuple(sorted(obj["metric"].items()))
            if key in out:
                raise AssertionError("series exported twice: %r" % (key,))
            out[key] = list(zip(obj["timestamps"], obj["values"]))
        return out
