#!/usr/bin/env python3
"""Python client costs (docs/performance.md, "Python client"):

1. the median cost of one run.log() of 10 keys (target <= 5 us), measured in
   chunks of 1000 calls while the sender thread ships them to a real server;
2. the slowdown of a real small PyTorch training loop (an MLP on CPU, one
   torch thread) with the client (log() of the loss every step +
   trainwatch.torch.watch every 10 steps) against the same loop without it
   (target <= 1 %).

How 2 is measured, so that it resolves 1 % on a shared, noisy machine:
- One process, one model, one optimizer: the loop runs in short blocks of
  --block-steps steps, in pairs (without, with), the order alternating from
  pair to pair, so drift in the machine's load hits both sides alike.
- A "with" block is a whole client life: init() and watch() before the
  block's clock starts, finish() (which sends everything the block logged)
  after it stops; a "without" block has no client at all (no thread).
  Each block's first --warm-steps steps are not timed (both sides).
- Per block: wall time of the loop, CPU time of the training thread
  (time.thread_time) and, for "with", the sender thread's CPU for the
  block's data, the final flush included.
- Threads are pinned (--cpus): the training thread to the first CPU; in the
  "spare core" scenario the sender thread and the server to the second, in
  the "one core" scenario the sender shares the training thread's CPU.
- The figure per pair is the relative difference with/without; the result
  is the median over pairs with a 95 % percentile-bootstrap interval
  (fixed seed), and how many pairs came out slower with the client.
- Wall time is split (Linux schedstat) into the training thread's CPU, its
  time runnable but waiting for a CPU (other load) and its time blocked
  (GIL, locks); "wall - waiting" is the loop's time had nothing else
  wanted its CPU.
- A last pass of long blocks counts the client's own CPU where it runs:
  thread CPU around log(), inside watch()'s wrapper (its profile flag),
  and the sender thread's cycles. It resolves far below 1 % but charges
  the client with cache misses that the training code after it would
  otherwise pay. bench/python_client/instr_client.py counts instructions.

Which quantity is the slowdown a user feels: with a spare core for the
sender, the loop's wall time (the sender's work runs beside training; what
remains is the client's work in the training thread and GIL hand-offs);
with no spare core, CPU per step (training thread + sender), since every
cycle the sender uses is taken from training.

Usage: bench_client.py --binary build/release/src/app/trainwatch [--calls N]
       [--pairs N] [--block-steps N] [--scenarios spare,one] [--cpus 0,1]
       [--warm-steps N] [--profile-blocks N] [--profile-steps N]
Standard library + (for 2) Debian's python3-torch; run with /usr/bin/python3.
"""
import argparse
import os
import random
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


def start_server(binary, tmp, cpu=None):
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "wb")
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--listen",
                             "127.0.0.1:%d" % port, "--scrape.self", "false"], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=pin, start_new_session=True)
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
    return statistics.median(per_call), per_call[int(len(per_call) * 0.99)], step


def sched_wait_ns():
    """Time this thread has spent runnable but waiting for a CPU (Linux
    schedstat), or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def median_ci(xs, rng, n_boot=10000):
    """Median of xs and a 95 % percentile-bootstrap interval for it."""
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(n_boot))
    return statistics.median(xs), meds[int(0.025 * n_boot)], meds[int(0.975 * n_boot) - 1]


class Loop:
    """The training loop under test: a 128-256-256-10 MLP, batch 64, AdamW."""

    def __init__(self, torch, url, spool, batches=200):
        self.torch = torch
        self.url = url
        self.spool = spool
        torch.manual_seed(0)
        self.x = torch.randn(batches, 64, 128)
        self.y = torch.randint(0, 10, (batches, 64))
        nn = torch.nn
        self.model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.i = 0
        self.blocks = 0
        self.warm_steps = 0

    def run_steps(self, steps, run):
        """`steps` training steps, logging the loss to `run` (None: no client)."""
        torch, model, opt = self.torch, self.model, self.opt
        x, y, n = self.x, self.y, len(self.x)
        for _ in range(steps):
            i = self.i
            self.i += 1
            loss = torch.nn.functional.cross_entropy(model(x[i % n]), y[i % n])
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()  # both loops read the loss, as a training loop prints it
            if run is not None:
                run.log({"loss": value, "lr": 1e-3}, step=i)

    def block(self, steps, with_client, sender_cpu=None, profile=False):
        """Runs `steps` steps. Returns (wall s, training-thread CPU s,
        sender CPU s, run-queue wait s, extra) where extra holds (log() CPU s,
        watch() CPU s, requests incl. the finish, timer s) for a "with" block;
        log() CPU and watch() CPU only when profiling."""
        import trainwatch.torch as twt
        torch, model, opt = self.torch, self.model, self.opt
        run = w = None
        if with_client:
            self.blocks += 1
            run = trainwatch.init(project="bench", name="torch-%d" % self.blocks, url=self.url,
                                  spool_dir=self.spool, capture_output=False, install_hooks=False,
                                  total_steps=steps)
            if sender_cpu is not None:
                os.sched_setaffinity(run._sender._thread.native_id, {sender_cpu})
            w = twt.watch(model, opt, every=10, run=run)
            w.steps = self.i  # steps count on across blocks: every 10th step logs, however short the block
        # Untimed first steps on both sides: right after init() (HTTP, files,
        # a thread start) the first ~10 steps run measurably slower (cold
        # caches), a once-per-run cost that short blocks would repeat.
        self.run_steps(self.warm_steps, run)
        if w is not None:
            w.profile = profile
        x, y, n = self.x, self.y, len(self.x)
        log_s = timer_s = 0.0
        clock = time.thread_time
        q0 = sched_wait_ns()
        w0, c0 = time.perf_counter(), time.thread_time()
        if not profile:
            self.run_steps(steps, run)
        for _ in range(steps if profile else 0):
            i = self.i
            self.i += 1
            loss = torch.nn.functional.cross_entropy(model(x[i % n]), y[i % n])
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
            c = clock()
            run.log({"loss": value, "lr": 1e-3}, step=i)
            log_s += clock() - c
            c = clock()
            timer_s += clock() - c  # what one timed region costs with nothing in it
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        q1 = sched_wait_ns()
        wait = (q1 - q0) / 1e9 if q0 is not None and q1 is not None else 0.0
        sender = 0.0
        extra = None
        if run is not None:
            w.remove()
            run.finish()
            # Its cycles for this block, the final flush included, for the timed steps' share of the points.
            sender = run._sender.cpu_seconds * steps / (steps + self.warm_steps)
            # log() and watch() (two timed regions a step) net of the timers' own cost
            extra = (log_s - timer_s, w.overhead_seconds - 2 * timer_s, run._sender.sent_batches + 1, timer_s)
        return wall, cpu, sender, wait, extra


def scenario(loop, pairs, steps, cpus, spare):
    """Interleaved pairs in one pinning; returns the per-pair figures."""
    train_cpu = cpus[0]
    sender_cpu = cpus[1] if spare and len(cpus) > 1 else cpus[0]
    os.sched_setaffinity(0, {train_cpu})
    loop.block(steps, False)  # warm-up, both sides
    loop.block(steps, True, sender_cpu)
    rows = []
    for p in range(pairs):
        if p % 2 == 0:
            a = loop.block(steps, False)
            b = loop.block(steps, True, sender_cpu)
        else:
            b = loop.block(steps, True, sender_cpu)
            a = loop.block(steps, False)
        rows.append((a, b))
    return rows


def report(name, rows, steps, rng):
    """Prints the paired figures of one scenario; returns the median
    training-thread CPU per step without the client."""
    print("%s: %d pairs of %d-step blocks" % (name, len(rows), steps))
    ms = lambda xs: statistics.median(xs) / steps * 1e3  # noqa: E731
    for side, k in (("without", 0), ("with", 1)):
        r = [p[k] for p in rows]
        print("  %-7s client, per step (medians): wall %.2f ms (p10-p90 %.2f-%.2f), training-thread CPU %.2f ms, "
              "waiting for a CPU %.2f ms, blocked %.3f ms" % (
                  side, ms([x[0] for x in r]), *(q / steps * 1e3 for q in deciles([x[0] for x in r])),
                  ms([x[1] for x in r]), ms([x[3] for x in r]), ms([x[0] - x[1] - x[3] for x in r])))
    for what, f in (("wall time", lambda r: r[0]),
                    ("wall - waiting for a CPU", lambda r: r[0] - r[3]),
                    ("training-thread CPU", lambda r: r[1]),
                    ("CPU, training thread + sender", lambda r: r[1] + r[2])):
        d = [f(b) / f(a) - 1 for a, b in rows]
        med, lo, hi = median_ci(d, rng)
        slower = sum(1 for x in d if x > 0)
        print("  %-30s %+6.2f %%  (95 %% CI %+.2f … %+.2f %%; mean %+.2f %%; %d of %d pairs slower with the client)"
              % (what + ":", med * 100, lo * 100, hi * 100, statistics.fmean(d) * 100, slower, len(d)))
    print("  sender thread CPU per step: %.1f us; training-thread CPU added per step (median of pairs): %.1f us"
          % (statistics.median(b[2] for _, b in rows) / steps * 1e6,
             statistics.median(b[1] - a[1] for a, b in rows) / steps * 1e6))
    return statistics.median(a[1] for a, _ in rows) / steps


def deciles(xs):
    xs = sorted(xs)
    return xs[len(xs) // 10], xs[(len(xs) * 9) // 10]


def bench_torch(url, spool, pairs, steps, scenarios, cpus, profile_blocks, profile_steps, warm_steps):
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    loop = Loop(torch, url, spool)
    loop.warm_steps = warm_steps
    rng = random.Random(7)
    base_cpu = []
    for sc in scenarios:
        spare = sc == "spare"
        if spare and len(cpus) < 2:
            print("spare core: only one CPU given (--cpus); skipped")
            continue
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        rows = scenario(loop, pairs, steps, cpus, spare)
        base_cpu.append(report("torch MLP loop, %s (training on CPU %d, sender on CPU %d)" % (
            "spare core" if spare else "one core", cpus[0], cpus[1] if spare else cpus[0]), rows, steps, rng))
        print("  %.0f s; load average %.1f at the start, %.1f at the end" % (
            time.monotonic() - t0, load0, os.getloadavg()[0]))
    # The client's own CPU, counted where it runs (thread CPU around log(),
    # inside watch()'s wrapper, the sender's cycles): not the difference of
    # two noisy totals, so it resolves far below 1 %, but it leaves out
    # indirect costs (the forward pre-hook, cache, GC) that the pairs include.
    # The timers cost a little themselves, so this pass is kept out of the pairs.
    os.sched_setaffinity(0, {cpus[0]})
    # Long blocks: the one request a block's finish adds weighs little.
    steps = profile_steps
    parts = [loop.block(steps, True, cpus[-1], profile=True) for _ in range(profile_blocks)]
    log_s = statistics.median(p[4][0] for p in parts) / steps
    watch_s = statistics.median(p[4][1] for p in parts) / steps
    sender_s = statistics.median(p[2] for p in parts) / steps
    reqs = statistics.median(p[4][2] for p in parts)
    timer = statistics.median(p[4][3] for p in parts) / steps
    base = statistics.median(base_cpu) if base_cpu else statistics.median(p[1] for p in parts) / steps
    total = log_s + watch_s + sender_s
    print("client CPU per step, counted where it runs (median of %d blocks): log() %.1f us + watch() %.1f us + "
          "sender %.1f us (%d requests per %d-step block, the finish included) = %.1f us = %.2f %% of the "
          "%.2f ms training-thread CPU per step (timer cost %.1f us per region, taken off)"
          % (len(parts), log_s * 1e6, watch_s * 1e6, sender_s * 1e6, reqs, steps, total * 1e6, total / base * 100,
             base * 1e3, timer * 1e6))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--block-steps", type=int, default=30,
                    help="steps per A/B block: short blocks pair up closely in time")
    ap.add_argument("--warm-steps", type=int, default=15, help="untimed steps at the start of every block")
    ap.add_argument("--profile-blocks", type=int, default=8)
    ap.add_argument("--profile-steps", type=int, default=600)
    ap.add_argument("--scenarios", default="spare,one", help="comma-separated: spare (a spare core for the sender "
                    "and server), one (sender on the training thread's core)")
    ap.add_argument("--cpus", default=None, help="training CPU, then the spare one (default: the first two allowed)")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else allowed[:2]
    tmp = tempfile.mkdtemp(prefix="tw-bench-client-")
    proc, url = start_server(args.binary, tmp, cpus[1] if len(cpus) > 1 else None)
    try:
        med, p99, n = bench_log(url, os.path.join(tmp, "spool"), args.calls)
        print("log() of 10 keys: median %.2f us, p99 %.2f us per call (%d calls, chunks of 1000)" % (med, p99, n))
        if not args.no_torch:
            try:
                import torch  # noqa: F401
            except ImportError:
                print("torch not installed: training-loop slowdown skipped")
            else:
                bench_torch(url, os.path.join(tmp, "spool"), args.pairs, args.block_steps,
                            [s for s in args.scenarios.split(",") if s], cpus, args.profile_blocks, args.profile_steps,
                            args.warm_steps)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
