#!/usr/bin/env python3
"""`trainwatch query` against a running trainwatch server.

Usage: query_cli_e2e_test.py /path/to/trainwatch [unittest args]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import twtest  # noqa: E402

T = 1796207100  # 2026-12-02T10:25:00Z


class QueryCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-query-cli-")
        cls.tw = twtest.Server(os.path.join(cls.tmp, "data")).start()
        lines = []
        for k in range(5):
            ts = (T + 15 * k) * 1000
            lines.append('training_loss{run="r1",rank="0"} %s %d' % (1.0 - 0.1 * k, ts))
            lines.append('training_loss{run="r1",rank="1"} %s %d' % (2.0 - 0.1 * k, ts))
        status, body = cls.tw.request("POST", "/api/v1/import/prometheus", ("\n".join(lines) + "\n").encode())
        assert status == 204, body
        cls.url = "http://127.0.0.1:%d" % cls.tw.port

    @classmethod
    def tearDownClass(cls):
        cls.tw.stop_quietly()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_cli(self, *args, server=None):
        argv = [twtest.BINARY, "query"] + list(args) + ["--server", server or self.url]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def test_instant_table(self):
        rc, out, err = self.run_cli("training_loss", "--time", str(T + 60))
        self.assertEqual(rc, 0, err)
        w = len('training_loss{rank="0", run="r1"}')
        self.assertEqual(out, "SERIES".ljust(w) + "  VALUE\n"
                              'training_loss{rank="0", run="r1"}  0.6\n'
                              'training_loss{rank="1", run="r1"}  1.6\n')
        self.assertEqual(err, "")

    def test_instant_aggregation_and_scalar(self):
        rc, out, _ = self.run_cli("sum by (run) (training_loss)", "--time", "2026-12-02T10:26:00Z")
        self.assertEqual(rc, 0)
        self.assertEqual(out.splitlines()[1].split(), ['{run="r1"}', "2.2"])
        rc, out, _ = self.run_cli("1+1", "--time", str(T))
        self.assertEqual((rc, out), (0, "2\n"))

    def test_range_blocks(self):
        rc, out, err = self.run_cli('training_loss{rank="0"}', "--start", str(T), "--end", str(T + 30), "--step", "15s")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out,
                         'training_loss{rank="0", run="r1"}\n'
                         "  2026-12-02T10:25:00Z  1\n"
                         "  2026-12-02T10:25:15Z  0.9\n"
                         "  2026-12-02T10:25:30Z  0.8\n")

    def test_empty_result(self):
        rc, out, _ = self.run_cli("nothing_here", "--time", str(T))
        self.assertEqual((rc, out), (0, "(no series)\n"))

    def test_errors_exit_1(self):
        rc, out, err = self.run_cli("sum(training_loss", "--time", str(T))
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("bad_data", err)
        self.assertIn("1:18: parse error", err)
        rc, _, err = self.run_cli("up", "--time", "yesterday")
        self.assertEqual(rc, 1)
        self.assertIn("--time", err)
        rc, _, err = self.run_cli("up", "--step", "15s")
        self.assertEqual(rc, 1)
        self.assertIn("--start", err)
        # Nothing listens on this port.
        rc, _, err = self.run_cli("up", server="http://127.0.0.1:%d" % twtest.free_port())
        self.assertEqual(rc, 1)
        self.assertIn("trainwatch query: http://127.0.0.1:", err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: query_cli_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
