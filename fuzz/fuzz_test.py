#!/usr/bin/env python3
"""Runs one libFuzzer target the way ctest (fuzz/CMakeLists.txt) and the
campaign (bench/fuzz/run.sh) do; docs/fuzzing.md.

1. Replays fuzz/regressions/<target>/* (inputs that once crashed): each must pass.
2. Assembles the seed corpus under WORK/seeds/<target>: fuzz/corpus/<target>/,
   files from ../shared/conformance and the repo's tests and testdata (read,
   never written), and make_seeds' output for the binary formats. Whatever is
   missing is skipped: a target without seeds still fuzzes.
3. Fuzzes for --seconds, or for --runs inputs from a fixed --seed, into
   WORK/corpus/<target> (kept between runs unless --fresh), crash inputs to
   WORK/artifacts/<target>/, and prints one summary line:
   "fuzz <target>: <execs> execs in <s> s, cov <n>, ft <n>, corpus <n>, crashes <n>".
Exit status: libFuzzer's (0 when nothing was found).

ctest runs `--fresh --runs N --seed 1`: the same inputs on every machine with
the same clang, so a test that passes here passes in CI; exploring new inputs
is the campaign's job (bench/fuzz/run.sh), whose finds become regressions.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time


def files_under(*patterns):
    out = []
    for p in patterns:
        out.extend(f for f in sorted(glob.glob(p, recursive=True)) if os.path.isfile(f))
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Seeds:
    def __init__(self, out_dir):
        self.dir = out_dir
        self.n = 0
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)

    def add(self, data, prefix=b""):
        with open(os.path.join(self.dir, "seed_%05d" % self.n), "wb") as f:
            f.write(prefix + data)
        self.n += 1

    def add_files(self, paths, prefixes=(b"",)):
        for p in paths:
            try:
                data = read(p)
            except OSError:
                continue
            for pre in prefixes:
                self.add(data, pre)


def promql_queries(paths, limit=3000):
    """The expressions of `eval` lines of PromQL test files."""
    pats = [re.compile(r"^\s*eval\S*\s+instant\s+at\s+\S+\s+(.+?)\s*$"),
            re.compile(r"^\s*eval\S*\s+range\s+from\s+\S+\s+to\s+\S+\s+step\s+\S+\s+(.+?)\s*$")]
    seen = []
    have = set()
    for p in paths:
        try:
            lines = read(p).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        for line in lines:
            for pat in pats:
                m = pat.match(line)
                if m and m.group(1) not in have:
                    have.add(m.group(1))
                    seen.append(m.group(1))
    return seen[:limit]


def assemble(target, seeds, src, shared, make_seeds, gen_dir):
    conf = os.path.join(shared, "conformance")
    seeds.add_files(files_under(os.path.join(src, "fuzz", "corpus", target, "*")))
    expo = os.path.join(conf, "exposition")
    if target == "exposition":
        text = [f for f in files_under(expo + "/*.txt", expo + "/upstream/**/*")
                if "openmetrics" not in f and not f.endswith(".om.txt")]
        seeds.add_files(text, prefixes=(b"\x00", b"\x01"))
    elif target == "openmetrics":
        seeds.add_files(files_under(expo + "/*openmetrics*", expo + "/upstream/**/*.om.txt",
                                    expo + "/upstream/**/*openmetrics*"))
    elif target == "promql":
        tests = files_under(conf + "/promql/*.test", conf + "/promql/**/*.test")
        for q in promql_queries(tests):
            seeds.add(q.encode())
    elif target == "rule_file":
        seeds.add_files(files_under(src + "/rules/*.yml", src + "/src/rules/testdata/*.yml"))
    elif target == "config":
        seeds.add_files(files_under(src + "/deploy/*.yml"))
    elif target == "template":
        seeds.add_files(files_under(src + "/src/notify/*.tmpl"), prefixes=(b"\x03",))
    if target in ("wal", "index", "chunks", "remote_write", "loki_proto") and make_seeds:
        out = os.path.join(gen_dir, target)
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([make_seeds, out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            print("fuzz %s: make_seeds failed (fuzzing without its seeds):\n%s" % (target, r.stdout))
        else:
            seeds.add_files(files_under(os.path.join(out, target, "*")))


def summary(target, output, seconds):
    execs = cov = ft = corp = None
    for line in output.splitlines():
        m = re.search(r"stat::number_of_executed_units:\s*(\d+)", line)
        if m:
            execs = int(m.group(1))
        m = re.search(r"\bcov: (\d+) ft: (\d+) corp: (\d+)", line)
        if m:
            cov, ft, corp = int(m.group(1)), int(m.group(2)), int(m.group(3))
    crashes = len(re.findall(r"Test unit written to", output))
    return ("fuzz %s: %s execs in %.0f s, cov %s, ft %s, corpus %s, crashes %d"
            % (target, execs, seconds, cov, ft, corp, crashes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--runs", type=int, default=0, help="inputs to run instead of --seconds (with --seed: reproducible)")
    ap.add_argument("--seed", type=int, default=0, help="libFuzzer's random seed (0: from the clock)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--shared", default="")
    ap.add_argument("--make-seeds", default="")
    ap.add_argument("--timeout", type=int, default=30, help="seconds one input may take")
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--fresh", action="store_true", help="start from the seeds only (drop WORK/corpus/<target>)")
    args = ap.parse_args()
    t = args.target

    regs = files_under(os.path.join(args.source, "fuzz", "regressions", t, "*"))
    if regs:
        r = subprocess.run([args.exe] + regs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace")
        if r.returncode != 0:
            print(r.stdout[-20000:])
            print("fuzz %s: a regression input fails again" % t)
            return r.returncode
        print("fuzz %s: %d regression input(s) pass" % (t, len(regs)))

    seeds = Seeds(os.path.join(args.work, "seeds", t))
    assemble(t, seeds, args.source, args.shared, args.make_seeds, os.path.join(args.work, "gen"))
    corpus = os.path.join(args.work, "corpus", t)
    if args.fresh:
        shutil.rmtree(corpus, ignore_errors=True)
    os.makedirs(corpus, exist_ok=True)
    artifacts = os.path.join(args.work, "artifacts", t) + "/"
    os.makedirs(artifacts, exist_ok=True)
    print("fuzz %s: %d seed(s)" % (t, seeds.n))
    budget = ["-runs=%d" % args.runs] if args.runs > 0 else ["-max_total_time=%d" % args.seconds]
    cmd = [args.exe, corpus, seeds.dir] + budget + [
        "-seed=%d" % args.seed, "-timeout=%d" % args.timeout, "-max_len=%d" % args.max_len,
        "-print_final_stats=1", "-artifact_prefix=" + artifacts]
    print(" ".join(cmd))
    sys.stdout.flush()
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    took = time.monotonic() - start
    out = r.stdout
    if r.returncode != 0:
        print(out[-30000:])
    else:
        tail = [l for l in out.splitlines() if l.startswith(("#", "stat::", "Done", "INFO: seed corpus"))]
        print("\n".join(tail[-8:]))
    print(summary(t, out, took))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
