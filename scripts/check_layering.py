#!/usr/bin/env python3
"""Fails when a module under src/ includes a header of a module it may not use.

The levels are docs/architecture.md's: a module includes only itself and
modules of a lower level; promql, scrape and rules reach data through
storage/ and never include tsdb/. Tests (*_test.cc, *_bench.cc) may reach up.
"""
import os
import re
import sys

LEVELS = {
    "base": 0,
    "model": 1,
    "common": 1.5,  # plumbing shared by the modules above model/: URLs, YAML fields, the HTTP client (base only)
    "template": 1.75,  # Go text/template: base and common; rules/ injects the PromQL behind `query`
    "tsdb/chunkenc": 2, "tsdb/wal": 2, "tsdb/index": 2,
    "storage": 3,
    "tsdb": 4, "logs": 4, "promql/parser": 4, "ingest": 4,
    "promql": 5, "scrape": 5, "collect/gpu": 5, "collect/host": 5, "runs": 5,
    "collect": 4.5,  # collect/family.h, snapshot.h: the output type collect/gpu and collect/host share (model and below)
    "rules": 6, "notify": 6, "remote": 6,
    "http": 7,
    "app": 8,
}
# Pairs (module, forbidden prefix) beyond the level rule.
FORBIDDEN = [("promql", "tsdb"), ("scrape", "tsdb"), ("rules", "tsdb"), ("runs", "tsdb/wal"), ("runs", "tsdb/index")]
# remote/ queues through tsdb/wal's segment format but never uses the engine;
# runs/ encodes its step store with tsdb/chunkenc's dense codec, nothing else.
FORBIDDEN_EXACT = [("remote", "tsdb"), ("runs", "tsdb")]
# Collectors use model and below only; app stores what they produce.
FORBIDDEN += [("collect", m) for m in ("storage", "tsdb", "ingest", "logs", "promql")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(rel):
    best = None
    for m in LEVELS:
        if rel == m or rel.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    errors = []
    checked = 0
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith((".h", ".cc")) or f.endswith(("_test.cc", "_bench.cc")) or "test_util" in f:
                continue
            path = os.path.join(root, f)
            rel_dir = os.path.relpath(root, src).replace(os.sep, "/")
            mod = module_of(rel_dir)
            if mod is None:
                errors.append(f"{path}: directory src/{rel_dir} is not a known module (add it to scripts/check_layering.py)")
                continue
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for line_no, m in ((text.count("\n", 0, m.start()) + 1, m) for m in INCLUDE.finditer(text)):
                inc = m.group(1)
                inc_mod = module_of(os.path.dirname(inc))
                if inc_mod is None:
                    continue  # a third-party or generated header
                checked += 1
                if inc_mod == mod:
                    continue
                if LEVELS[inc_mod] >= LEVELS[mod]:
                    errors.append(f"{path}:{line_no}: {mod} (level {LEVELS[mod]}) includes {inc} "
                                  f"from {inc_mod} (level {LEVELS[inc_mod]})")
                for a, b in FORBIDDEN_EXACT:
                    if (mod == a or mod.startswith(a + "/")) and inc_mod == b:
                        errors.append(f"{path}:{line_no}: {mod} must use storage/, not {inc}")
                for a, b in FORBIDDEN:
                    if mod == a or mod.startswith(a + "/"):
                        if inc_mod == b or inc_mod.startswith(b + "/"):
                            errors.append(f"{path}:{line_no}: {mod} must use storage/, not {inc}")
    for e in errors:
        print(e)
    print(f"layering: {checked} includes checked, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
