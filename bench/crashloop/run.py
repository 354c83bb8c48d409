#!/usr/bin/env python3
"""Crash loop benchmark (issue 17): SIGKILL `trainwatch serve` --kills times
(default 1000) at random moments while every write path is written, restart
it, and check that every acknowledged write is found exactly once.

The loop is tests/e2e/crashloop.py (the CI test tests/e2e/crash_loop_test.py
runs the same code with 20 kills). See bench/crashloop/README.md.

Usage: bench/crashloop/run.py [--binary build/release/src/app/trainwatch] [--kills 1000] [--seed N] ...
Exit status: 0 when nothing acknowledged was lost or duplicated and every
start became ready by itself, 1 otherwise (the seed and kill number are printed).
"""
import argparse
import json
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import crashloop  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "src", "app", "trainwatch"))
    ap.add_argument("--kills", type=int, default=1000, help="SIGKILLs while writing (default 1000)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    ap.add_argument("--min-delay", type=float, default=0.2, help="earliest kill after the writers start, s")
    ap.add_argument("--max-delay", type=float, default=2.0, help="latest kill after the writers start, s")
    ap.add_argument("--startup-kill-fraction", type=float, default=0.1,
                    help="share of restarts that are first killed once during start-up (default 0.1)")
    ap.add_argument("--full-check-every", type=int, default=25,
                    help="check everything written so far every N kills (always at the end); 0: only at the end")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="start no new kill after this many minutes, then run the end checks (default 0: no limit)")
    ap.add_argument("--allow-startup-errors", action="store_true",
                    help="report, instead of failing on, level=error lines a start logs (e.g. an unreadable block)")
    ap.add_argument("--writers", type=int, default=2, help="concurrent writers per path (silences: one)")
    ap.add_argument("--pace", type=float, default=0.02, help="pause between a writer's requests, s")
    ap.add_argument("--ready-timeout", type=float, default=60.0, help="a start not ready by then fails, s")
    ap.add_argument("--progress-every", type=int, default=10, help="print a progress line every N kills")
    ap.add_argument("--workdir", default=None, help="data dir parent (default: a temp dir, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (data and server.log)")
    ap.add_argument("--json", default=None, help="write the summary as JSON to this file")
    ap.add_argument("serve_args", nargs="*", help="extra `serve` flags after --, e.g. -- --wal.sync interval")
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        sys.exit("no trainwatch binary at %s (--binary)" % a.binary)
    opts = crashloop.Options(kills=a.kills, seed=a.seed, min_delay=a.min_delay, max_delay=a.max_delay,
                             startup_kill_fraction=a.startup_kill_fraction, full_check_every=a.full_check_every,
                             ready_timeout=a.ready_timeout, pace=a.pace, writers=a.writers, workdir=a.workdir,
                             keep=a.keep, progress_every=a.progress_every, extra_args=a.serve_args,
                             out=sys.stdout, max_minutes=a.max_minutes,
                             allow_startup_errors=a.allow_startup_errors)
    loop = crashloop.CrashLoop(a.binary, opts)

    # The first SIGTERM / SIGINT (also when started in the background, where SIGINT is
    # ignored by default) ends the loop after the current kill with the end checks; a second
    # one interrupts at once, through the cleanup (the server killed by its pid, the temp dir
    # removed unless --keep).
    def interrupt(signum, frame):
        if loop.stop_requested:
            raise KeyboardInterrupt("signal %d" % signum)
        loop.stop_requested = True
        os.write(1, b"signal: stopping after this kill, then the end checks (again: stop now)\n")
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        ok = loop.run()
    except KeyboardInterrupt:
        loop.interrupted = True
        ok = False
    print(loop.report())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(loop.summary(), f, indent=1, sort_keys=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
