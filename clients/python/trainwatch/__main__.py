"""`python -m trainwatch sync [--spool DIR] [--url URL]`: sends what runs left
spooled on disk (the server was unreachable when they finished)."""
import argparse
import json
import os
import sys

from ._sender import Sender


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m trainwatch", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sync", help="send spooled requests")
    s.add_argument("--spool", default=os.environ.get("TRAINWATCH_SPOOL") or
                   os.path.join(os.path.expanduser("~"), ".cache", "trainwatch", "spool"))
    s.add_argument("--url", help="server (default: the one each run used)")
    s.add_argument("--timeout", type=float, default=30, help="seconds to wait for the server per run")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.spool):
        print("nothing spooled in %s" % args.spool)
        return 0
    left = 0
    for d in sorted(os.listdir(args.spool)):
        path = os.path.join(args.spool, d)
        try:
            with open(os.path.join(path, "meta.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        snd = Sender(args.url or meta["url"], meta["run_id"], meta["rank"], meta["register"].get("host", ""),
                     path, meta["register"], fallback=False)
        if snd.locked_out:
            print("%s: in use by a running process; skipped" % d)
            continue
        snd.registered = True  # registers only if the server does not know the run
        n = snd.spooled
        snd.start()
        ok = snd.stop(args.timeout)
        print("%s: %d requests %s" % (d, n, "sent" if ok else "NOT sent (%d left)" % snd.spooled))
        left += snd.spooled
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
