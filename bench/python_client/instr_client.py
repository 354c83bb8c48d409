#!/usr/bin/env python3
"""Instruction counts of the Python client's cost in the training loop of
bench_client.py, under valgrind's callgrind (docs/performance.md, "Python
client"): repeatable whatever else the machine runs, where CPU time on a
shared VM swings by +-5 % from block to block.

The script re-runs itself under `valgrind --tool=callgrind
--instr-atstart=no --separate-threads=yes`; torch's import and the warm-up
run uninstrumented. Then, in one process, blocks of --block-steps steps
alternate without / with the client (log() every step + watch(every=10)),
counting is zeroed before and dumped after each block's loop with
callgrind_control, and each thread's count is read from its dump. The
sender's flush_interval is scaled by valgrind's slowdown, measured on the
first counted block, so that a request carries as many steps as it does
natively at the default 0.5 s (--native-step-ms, the native step time).

Caveats: instructions are not seconds (the client's Python code runs at a
lower IPC than torch's kernels, so its share of time is larger than its
share of instructions), and under valgrind (no AVX-512) torch runs its
AVX2 kernels.

Usage: instr_client.py --binary build/release/src/app/trainwatch [--blocks N] [--block-steps N]
"""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_client as bc  # noqa: E402  (puts clients/python on sys.path)
import trainwatch  # noqa: E402


def ctl(*args):
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, stdout=subprocess.DEVNULL,
                   timeout=300)


def thread_counts(out_dir, label):
    """{thread number: instructions} of the dump named `label`."""
    counts = {}
    for fn in glob.glob(os.path.join(out_dir, "cg.out.*")):
        with open(fn) as f:
            text = f.read(4096)
        if ("dump " + label + "\n") not in text:
            continue
        thread = summary = None
        for line in text.splitlines():
            if line.startswith("thread: "):
                thread = int(line.split()[1])
            elif line.startswith("summary: ") or line.startswith("totals: "):
                summary = int(line.split()[1])
        if thread is not None and summary is not None:
            counts[thread] = summary
    return counts


def child(args):
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    out_dir = args.out
    loop = bc.Loop(torch, args.url, args.spool)
    loop.block(20, False)
    loop.block(20, True)
    ctl("-i", "on")
    rows = []
    flush = 0.5
    for b in range(args.blocks * 2):
        with_client = b % 2 == 1
        run = w = None
        if with_client:
            import trainwatch.torch as twt
            run = trainwatch.init(project="bench", name="instr-%d" % b, url=args.url, spool_dir=args.spool,
                                  capture_output=False, install_hooks=False, flush_interval=flush)
            w = twt.watch(loop.model, loop.opt, every=10, run=run)
        label = "b%d" % b
        ctl("-z")
        t0 = time.perf_counter()
        loop.run_steps(args.block_steps, run)
        wall = time.perf_counter() - t0
        requests = run._sender.sent_batches if run is not None else 0
        ctl("-d", label)
        if run is not None:
            w.remove()
            if run._sender.sent_batches != requests:
                sys.exit("a request went out between the loop's end and the dump; run again")
            run.finish()
        else:
            # Steps per request as natively: flush_interval / native step = scaled interval / step here.
            flush = 0.5 * (wall / args.block_steps) / (args.native_step_ms / 1000.0)
        rows.append((label, with_client, requests, wall))
    with open(os.path.join(out_dir, "rows.txt"), "w") as f:
        for label, with_client, requests, wall in rows:
            f.write("%s %d %d %.3f %d\n" % (label, with_client, requests, wall, threading.main_thread().native_id))
        f.write("flush %.3f\n" % flush)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary")
    ap.add_argument("--blocks", type=int, default=1, help="pairs of blocks")
    ap.add_argument("--block-steps", type=int, default=150)
    ap.add_argument("--native-step-ms", type=float, default=8.5)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--url")
    ap.add_argument("--spool")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not args.binary:
        sys.exit("--binary is required")
    tmp = tempfile.mkdtemp(prefix="tw-instr-client-")
    proc, url = bc.start_server(args.binary, tmp)
    try:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               "--callgrind-out-file=" + os.path.join(tmp, "cg.out.%p"), sys.executable, os.path.abspath(__file__),
               "--child", "--url", url, "--spool", os.path.join(tmp, "spool"), "--out", tmp,
               "--blocks", str(args.blocks), "--block-steps", str(args.block_steps),
               "--native-step-ms", str(args.native_step_ms)]
        subprocess.run(cmd, check=True, cwd=tmp, stderr=subprocess.DEVNULL)
        with open(os.path.join(tmp, "rows.txt")) as f:
            lines = f.read().split("\n")
        per_step = {"train": {False: [], True: []}, "sender": [], "others": [], "requests": []}
        steps = args.block_steps
        for line in lines:
            parts = line.split()
            if len(parts) != 5:
                continue
            label, with_client, requests = parts[0], parts[1] == "1", int(parts[2])
            counts = thread_counts(tmp, label)
            train = counts.get(1, 0)  # callgrind numbers threads from 1, the main thread first
            others = sum(v for t, v in counts.items() if t != 1)
            per_step["train"][with_client].append(train / steps)
            if with_client:
                per_step["sender"].append(others / steps)
                per_step["requests"].append(requests)
                print("%s with client: training thread %.2f M instr/step, other threads %.3f M/step (%d requests)"
                      % (label, train / steps / 1e6, others / steps / 1e6, requests))
            else:
                per_step["others"].append(others / steps)
                print("%s without:     training thread %.2f M instr/step, other threads %.3f M/step"
                      % (label, train / steps / 1e6, others / steps / 1e6))
        a = min(per_step["train"][False])
        b = min(per_step["train"][True])
        # The sender's instructions per request, at as many points a request
        # as natively, times the native requests per step.
        sender = [(x - min(per_step["others"])) * steps / r for x, r in zip(per_step["sender"], per_step["requests"]) if r]
        per_req = min(sender) if sender else 0.0
        s = per_req * (args.native_step_ms / 1000.0) / 0.5
        print("instructions per step: without %.3f M; with %.3f M in the training thread (%+.3f %%) + %.3f M in "
              "the sender (%.2f M per request, one per %.0f native steps) = %+.3f %% (%d-step blocks, least of %d each)"
              % (a / 1e6, b / 1e6, (b / a - 1) * 100, s / 1e6, per_req / 1e6, 0.5 / (args.native_step_ms / 1000.0),
                 ((b + s) / a - 1) * 100, steps, args.blocks))
        print(lines[-2] if lines[-1] == "" else lines[-1])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
