#!/usr/bin/env python3
"""Checks that the build's clang really enforces the thread-safety annotations.

Compiles two small programs against base/mutex.h with -Wthread-safety -Werror:
one that touches a TW_GUARDED_BY member under its lock (must compile) and one
that touches it without (must fail, naming the mutex). Without this, a flag
dropped from CMakeLists.txt or a macro that expands to nothing under clang
would turn every annotation into a comment and nothing would say so.

  check_thread_safety.py <clang++> <src dir> [<build dir>]

With a build dir, also checks that its compile_commands.json compiles every
source with -Wthread-safety (the flag CMakeLists.txt adds for clang).
"""
import json
import os
import subprocess
import sys
import tempfile

GOOD = r'''
#include "base/mutex.h"
class Counter {
 public:
  void Add() TW_EXCLUDES(mu_) { trainwatch::base::MutexLock l(&mu_); n_++; }
  int Get() TW_EXCLUDES(mu_) {
    trainwatch::base::MutexLock l(&mu_);
    while (n_ == 0) cv_.Wait(&mu_);
    return n_;
  }
  void AddLocked() TW_REQUIRES(mu_) { n_++; }
 private:
  trainwatch::base::Mutex mu_;
  trainwatch::base::CondVar cv_;
  int n_ TW_GUARDED_BY(mu_) = 0;
};
int main() { Counter c; c.Add(); return c.Get() == 1 ? 0 : 1; }
'''

BAD = {
    "unlocked write": GOOD.replace("void Add() TW_EXCLUDES(mu_) { trainwatch::base::MutexLock l(&mu_); n_++; }",
                                   "void Add() { n_++; }"),
    "call without the lock": GOOD.replace("int main() { Counter c; c.Add();",
                                          "void Bad(Counter& c) { c.AddLocked(); }\nint main() { Counter c; c.Add();"),
}


def compile_snippet(cxx, src_dir, text, workdir):
    path = os.path.join(workdir, "snippet.cc")
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wthread-safety", "-Werror", "-I", src_dir, path],
                          capture_output=True, text=True)


def main():
    cxx, src_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        r = compile_snippet(cxx, src_dir, GOOD, d)
        if r.returncode != 0:
            print("correctly locked code does not compile:\n" + r.stderr)
            return 1
        for what, text in BAD.items():
            assert text != GOOD, what
            r = compile_snippet(cxx, src_dir, text, d)
            if r.returncode == 0 or "requires holding mutex" not in r.stderr or "mu_'" not in r.stderr:
                print("%s: expected a thread-safety error naming mu_, got rc=%d:\n%s" % (what, r.returncode, r.stderr))
                return 1
            print("%s: refused (%s)" % (what, r.stderr.strip().splitlines()[0]))
    if len(sys.argv) > 3:
        with open(os.path.join(sys.argv[3], "compile_commands.json")) as f:
            commands = json.load(f)
        missing = [c["file"] for c in commands if "-Wthread-safety" not in c.get("command", " ".join(c.get("arguments", [])))]
        if not commands or missing:
            print("compiled without -Wthread-safety: %d of %d, e.g. %s" % (len(missing), len(commands), missing[:3]))
            return 1
        print("all %d sources of %s compile with -Wthread-safety" % (len(commands), sys.argv[3]))
    print("thread-safety analysis enforced by", cxx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
