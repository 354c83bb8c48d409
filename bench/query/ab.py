#!/usr/bin/env python3
"""Two trainwatch binaries side by side on one kept data dir: the peers
harness's query set, requests interleaved A, B, A, B, ... so both see the
same machine. Prints warm medians, the B/A ratio and whether the results
agree.

The data dir comes from a harness run that kept it:
  bash ../shared/bench/peers/run.sh --workdir /tmp/pb --peers third --keep-data
(with PEERBENCH_THIRD_* set as in docs/performance.md); then
  python3 bench/query/ab.py --data /tmp/pb/run/trainwatch/data \\
      --meta /tmp/pb/payload/remote_write-*/meta.json OLD_BINARY NEW_BINARY
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "shared", "bench", "peers"))
import peerbench  # noqa: E402  (the harness's own query set and digest)


def start(binary, data, port):
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:%d" % port, "--data-dir", data,
                          "--collect.host=false", "--collect.gpu=false", "--rules.default-pack=false"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % port, timeout=1).read()
            return p
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("%s exited with %d" % (binary, p.returncode))
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("%s not ready on port %d" % (binary, port))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="kept trainwatch data dir (copied, never modified)")
    ap.add_argument("--meta", required=True, help="the harness payload's meta.json")
    ap.add_argument("--runs", type=int, default=20, help="warm runs per query and binary (after one cold run)")
    ap.add_argument("--port-base", type=int, default=19400)
    ap.add_argument("binaries", nargs=2, metavar="BINARY")
    a = ap.parse_args()
    with open(a.meta) as f:
        meta = json.load(f)
    tmp = tempfile.mkdtemp(prefix="tw-query-ab-")
    procs, peers = [], []
    try:
        for i, b in enumerate(a.binaries):
            data = os.path.join(tmp, "data%d" % i)
            shutil.copytree(a.data, data)
            procs.append(start(b, data, a.port_base + i))
            peers.append(types.SimpleNamespace(port=a.port_base + i, query_params={}))
        print("%-26s %10s %10s %7s  results" % ("query", "A p50 ms", "B p50 ms", "B/A"))
        for name, kind, q in peerbench.query_set(meta):
            times = [[], []]
            digests = [None, None]
            for r in range(a.runs + 1):
                for i, peer in enumerate(peers):
                    dt, digest = peerbench.run_query(peer, kind, q, meta)
                    if r == 0:
                        digests[i] = digest
                    else:
                        times[i].append(dt * 1000)
            ma, mb = statistics.median(times[0]), statistics.median(times[1])
            same = digests[0]["series"] == digests[1]["series"] and digests[0]["points"] == digests[1]["points"] and \
                abs(digests[0]["sum"] - digests[1]["sum"]) <= 1e-9 * max(1.0, abs(digests[0]["sum"]))
            print("%-26s %10.2f %10.2f %7.2f  %s" % (name, ma, mb, mb / ma, "same" if same else "DIFFER %s" % digests))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
