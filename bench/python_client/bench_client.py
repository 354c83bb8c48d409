#!/usr/bin/env python3
"""Python client costs (docs/performance.md, "Python client"):

1. the median cost of one run.log() of 10 keys (target <= 5 us), measured in
   chunks of 1000 calls while the sender thread ships them to a real server;
2. the slowdown of a real small PyTorch training loop (an MLP on CPU) with
   the client (log() every step + trainwatch.torch.watch every 10 steps)
   against the same loop without it (target <= 1 %), runs interleaved,
   median of --repeats.

Usage: bench_client.py --binary build/release/src/app/trainwatch [--calls N] [--steps N] [--repeats N]
Standard library + (for 2) Debian's python3-torch; run with /usr/bin/python3.
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import trainwatch  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, tmp):
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "wb")
    proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--listen",
                             "127.0.0.1:%d" % port, "--scrape.self", "false"], stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/-/ready", timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("server did not start")


def bench_log(url, spool, calls):
    run = trainwatch.init(project="bench", name="log-cost", url=url, spool_dir=spool, capture_output=False,
                          install_hooks=False)
    values = {"loss": 0.5, "lr": 3e-4, "grad_norm": 1.2, "param_norm": 40.0, "samples_per_sec": 1800.0,
              "step_time_seconds": 0.14, "train/acc": 0.8, "val/loss": 0.6, "tokens": 1e6, "mem_gb": 30.5}
    chunk = 1000
    per_call = []
    step = 0
    clock = time.perf_counter_ns
    for _ in range(calls // chunk):
        t0 = clock()
        for _ in range(chunk):
            values["loss"] = step * 1e-6
            run.log(values, step=step)
            step += 1
        per_call.append((clock() - t0) / chunk / 1000.0)
    run.finish()
    per_call.sort()
    return statistics.median(per_call), per_call[int(len(per_call) * 0.99)], step, run


def bench_torch(url, spool, steps, repeats):
    import torch
    import trainwatch.torch as twt
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x_all = torch.randn(steps, 64, 128)
    y_all = torch.randint(0, 10, (steps, 64))

    def loop(with_client):
        """(wall s, training-thread CPU s, process CPU s) of `steps` steps."""
        model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                    torch.nn.ReLU(), torch.nn.Linear(256, 10))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        run = None
        if with_client:
            run = trainwatch.init(project="bench", name="torch", url=url, spool_dir=spool, capture_output=False,
                                  install_hooks=False, total_steps=steps)
            w = twt.watch(model, opt, every=10, run=run)
            w.profile = True
        log_s = 0.0
        clock = time.perf_counter
        w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        for i in range(steps):
            loss = torch.nn.functional.cross_entropy(model(x_all[i]), y_all[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()  # both loops read the loss, as a training loop prints it
            if run is not None:
                c = clock()
                run.log({"loss": value, "lr": 1e-3}, step=i)
                log_s += clock() - c
        out = (time.perf_counter() - w0, time.thread_time() - t0, time.process_time() - p0)
        if run is not None:
            run.finish()
            # What the client added per step: log() calls, watch()'s wrapper, the sender thread's CPU.
            client_costs.append((log_s + w.overhead_seconds + run._sender.cpu_seconds) / steps)
        return out

    without, with_, client_costs = [], [], []
    loop(False)  # warm-up
    for i in range(repeats):  # interleaved, alternating which goes first
        pair = [loop(False), loop(True)] if i % 2 == 0 else list(reversed([loop(True), loop(False)]))
        without.append(pair[0])
        with_.append(pair[1])
    out = []
    for k in range(3):
        a = statistics.median(x[k] for x in without)
        b = statistics.median(x[k] for x in with_)
        out.append((a, b, (b - a) / a * 100))
    step_s = statistics.median(x[0] for x in without) / steps
    return out, statistics.median(client_costs), step_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tw-bench-client-")
    proc, url = start_server(args.binary, tmp)
    try:
        med, p99, n, _ = bench_log(url, os.path.join(tmp, "spool"), args.calls)
        print("log() of 10 keys: median %.2f us, p99 %.2f us per call (%d calls, chunks of 1000)" % (med, p99, n))
        if not args.no_torch:
            try:
                res, cost, step_s = bench_torch(url, os.path.join(tmp, "spool"), args.steps, args.repeats)
            except ImportError:
                print("torch not installed: training-loop slowdown skipped")
            else:
                for what, (a, b, pct) in zip(("wall time", "training-thread CPU", "process CPU (+ sender thread)"), res):
                    print("torch MLP loop, %d steps, %s: without client %.3f s, with client %.3f s (median of %d): "
                          "%+.2f %%" % (args.steps, what, a, b, args.repeats, pct))
                print("client time per training step: %.1f us (log() + watch() + sender thread CPU) = %.3f %% "
                      "of the %.2f ms step" % (cost * 1e6, cost / step_s * 100, step_s * 1000))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
