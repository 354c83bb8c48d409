#!/usr/bin/env python3
"""Scrape load generator: N targets x M series on one loopback port.

Target i is served at /metrics/<i> in the Prometheus text format: M gauge
series `bench_metric_<k % 50>{series="<k>", shard="<k % 10>"}`. Bodies are
pre-rendered in a few variants with different values, so values change
between scrapes while the generator spends almost no CPU.

Usage: generator.py PORT TARGETS SERIES
"""
import http.server
import random
import socketserver
import sys

VARIANTS = 4


def render(target, series, variant):
    rnd = random.Random(target * 1000 + variant)
    out = []
    for m in range(min(50, series)):
        out.append("# HELP bench_metric_%d A generated gauge.\n# TYPE bench_metric_%d gauge\n" % (m, m))
        for k in range(m, series, 50):
            out.append('bench_metric_%d{series="%d",shard="%d"} %.6g\n' % (m, k, k % 10, rnd.random() * 1000))
    return "".join(out).encode()


def main():
    port, targets, series = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    bodies = [[render(t, series, v) for v in range(VARIANTS)] for t in range(targets)]
    counters = [0] * targets

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            parts = self.path.split("?")[0].split("/")
            try:
                t = int(parts[2])
                body = bodies[t][counters[t] % VARIANTS]
                counters[t] += 1
            except (IndexError, ValueError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    srv = Server(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
