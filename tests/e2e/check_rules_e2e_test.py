#!/usr/bin/env python3
"""`trainwatch check rules` beside Prometheus's own `promtool check rules`.

Usage: check_rules_e2e_test.py /path/to/trainwatch [unittest args]

- Good and bad rule files (one per error kind) are checked by both tools:
  exit codes must agree, and where promtool's message is deterministic the
  error lines must be the same.
- The shipped rule pack rules/training.rules.yml passes both checkers, and
  `promtool test rules rules/training.rules.test.yml` (recorded series that
  do and do not trip each rule) passes.
- The template cases of src/rules/testdata/template_parity.yml (which
  rules_test runs through trainwatch's engine) are run through Prometheus's
  Go templates with `promtool test rules`: both must print the same text.

The promtool parts are skipped when /usr/bin/promtool is missing (it ships
with Debian's prometheus package).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

PROMTOOL = "/usr/bin/promtool"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAINWATCH = None

GOOD = """groups:
- name: example
  interval: 30s
  limit: 100
  rules:
  - record: job:up:sum
    expr: sum by (job) (up)
    labels: {team: infra}
  - alert: InstanceDown
    expr: up == 0
    for: 5m
    keep_firing_for: 2m
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.instance }} of {{ $labels.job }} is down'
      description: '{{ if gt $value 0.0 }}{{ $value | humanize }}{{ else }}zero{{ end }} {{ range $k, $v := $labels }}{{ $k }}={{ $v }} {{ end }}'
- name: second
  rules: []
"""

# name -> (file content, compare error lines exactly)
BAD = {
    "record_and_alert": ("groups:\n- name: g\n  rules:\n  - alert: A\n    record: r\n    expr: up\n", True),
    "neither": ("groups:\n- name: g\n  rules:\n  - expr: up\n", True),
    "bad_record_name": ("groups:\n- name: g\n  rules:\n  - record: 'a b'\n    expr: up\n", True),
    "annotations_on_record": ("groups:\n- name: g\n  rules:\n  - record: r\n    expr: up\n    annotations: {a: b}\n", True),
    "for_on_record": ("groups:\n- name: g\n  rules:\n  - record: r\n    expr: up\n    for: 1m\n", True),
    "keep_firing_on_record": ("groups:\n- name: g\n  rules:\n  - record: r\n    expr: up\n    keep_firing_for: 1m\n",
                              True),
    "expr_parse_error": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(up\n", False),
    "expr_missing": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: ''\n", True),
    "metric_name_label": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    labels: {__name__: x}\n", True),
    "bad_label_name": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    labels: {'a-b': x}\n", True),
    "bad_annotation_name": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations: {'a-b': x}\n",
                            True),
    "template_unclosed": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n"
                          "    annotations: {s: '{{ $labels.x '}\n", True),
    "template_undefined_function": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n"
                                    "    labels: {s: '{{ nosuchfunc 1 }}'}\n", True),
    "template_undefined_variable": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n"
                                    "    annotations: {s: '{{ $nope }}'}\n", True),
    "duplicate_group": ("groups:\n- name: g\n  rules: []\n- name: g\n  rules: []\n", True),
    "empty_group_name": ("groups:\n- name: ''\n  rules: []\n", True),
    "unknown_group_key": ("groups:\n- name: g\n  unknown: 1\n  rules: []\n", False),
    "unknown_rule_key": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    bogus: 2\n", False),
    "unknown_top_key": ("group:\n- name: g\n", False),
    "bad_duration": ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    for: 5x\n", True),
    "bad_interval": ("groups:\n- name: g\n  interval: soon\n  rules: []\n", True),
    "not_a_list": ("groups: 3\n", False),
    "yaml_syntax": ("groups:\n- name: g\n  rules: [\n", False),
    "limit_not_int": ("groups:\n- name: g\n  limit: many\n  rules: []\n", True),
}


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def error_lines(stderr):
    return sorted(l for l in stderr.splitlines() if l.strip() and l.strip() != "FAILED:")


class CheckRulesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tw-check-rules-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content)
        return path

    def check_both(self, path):
        # Run both from the file's directory with a relative name so messages agree.
        rel = os.path.basename(path)
        tw = subprocess.run([TRAINWATCH, "check", "rules", rel], capture_output=True, text=True, cwd=self.dir,
                            timeout=60)
        pt = None
        if os.path.exists(PROMTOOL):
            pt = subprocess.run([PROMTOOL, "check", "rules", rel], capture_output=True, text=True, cwd=self.dir,
                                timeout=60)
        return tw, pt

    def test_good_file(self):
        path = self.write("good.yml", GOOD)
        tw, pt = self.check_both(path)
        self.assertEqual(tw.returncode, 0, tw.stderr)
        self.assertEqual(tw.stdout, "Checking good.yml\n  SUCCESS: 2 rules found\n\n")
        if pt is not None:
            self.assertEqual(pt.returncode, 0, pt.stderr)
            self.assertEqual(pt.stdout, tw.stdout)

    def test_bad_files(self):
        for name, (content, exact) in BAD.items():
            with self.subTest(name):
                path = self.write(name + ".yml", content)
                tw, pt = self.check_both(path)
                self.assertEqual(tw.returncode, 1, f"{name}: {tw.stdout}{tw.stderr}")
                self.assertTrue(tw.stdout.startswith(f"Checking {name}.yml\n"), tw.stdout)
                self.assertIn("FAILED:", tw.stderr)
                for line in error_lines(tw.stderr):
                    if not line.startswith(" "):  # yaml.v3-style continuation lines are indented
                        self.assertTrue(line.startswith(f"{name}.yml: "), line)
                if pt is None:
                    continue
                self.assertEqual(pt.returncode, tw.returncode, f"{name}: promtool {pt.stderr}")
                if exact:
                    self.assertEqual(error_lines(tw.stderr), error_lines(pt.stderr), name)

    def test_several_files_one_bad(self):
        good = self.write("good.yml", GOOD)
        bad = self.write("bad.yml", BAD["neither"][0])
        code, out, err = run([TRAINWATCH, "check", "rules", good, bad])
        self.assertEqual(code, 1)
        self.assertIn("SUCCESS: 2 rules found", out)
        self.assertIn("one of 'record' or 'alert' must be set", err)
        if os.path.exists(PROMTOOL):
            self.assertEqual(run([PROMTOOL, "check", "rules", good, bad])[0], 1)

    def test_duplicate_recording_rules_lint(self):
        path = self.write("dup.yml", "groups:\n- name: g\n  rules:\n  - record: a\n    expr: up\n"
                                     "  - record: a\n    expr: up\n")
        for extra, want in (([], 0), (["--lint-fatal"], 3), (["--lint=none"], 0)):
            code, out, err = run([TRAINWATCH, "check", "rules"] + extra + [path])
            self.assertEqual(code, want, extra)
            if os.path.exists(PROMTOOL):
                self.assertEqual(run([PROMTOOL, "check", "rules"] + extra + [path])[0], want, extra)
        code, out, err = run([TRAINWATCH, "check", "rules", path])
        self.assertIn("lint error 1 duplicate rule(s) found.", err)

    def test_training_rule_pack(self):
        pack = os.path.join(ROOT, "rules", "training.rules.yml")
        code, out, err = run([TRAINWATCH, "check", "rules", pack])
        self.assertEqual(code, 0, err)
        with open(pack) as f:
            rules = sum(1 for line in f if re.match(r"\s*- (alert|record):", line))
        self.assertIn("SUCCESS: %d rules found" % rules, out)
        if not os.path.exists(PROMTOOL):
            self.skipTest("promtool not installed")
        code, pout, err = run([PROMTOOL, "check", "rules", pack])
        self.assertEqual(code, 0, err)
        self.assertEqual(pout, out)
        # Recorded series that do and do not trip each rule, evaluated by Prometheus.
        p = subprocess.run([PROMTOOL, "test", "rules", "training.rules.test.yml"], capture_output=True, text=True,
                           cwd=os.path.join(ROOT, "rules"), timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


def series(labels, name):
    inner = ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                     for k, v in sorted(labels.items()) if k != "__name__")
    return "%s{%s}" % (name, inner)


@unittest.skipUnless(os.path.exists(PROMTOOL), "promtool not installed")
class TemplateParityTest(unittest.TestCase):
    """The shared template cases, expanded by Prometheus's Go text/template."""

    def setUp(self):
        with open(os.path.join(ROOT, "src", "rules", "testdata", "template_parity.yml")) as f:
            self.cases = yaml.safe_load(f)
        self.dir = tempfile.mkdtemp(prefix="tw-template-parity-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_outputs_match_prometheus(self):
        rules = {"groups": [{"name": "parity", "rules": []}]}
        test = {"interval": "1m", "input_series": [], "alert_rule_test": []}
        for q in self.cases["query_series"]:
            test["input_series"].append({"series": series(q["labels"], q["labels"]["__name__"]),
                                         "values": str(q["value"])})
        for i, c in enumerate(self.cases["cases"]):
            metric = "tw_case_%d" % i
            test["input_series"].append({"series": series(c["labels"], metric), "values": str(c["value"])})
            # `+ 0` drops __name__, so $labels is exactly the case's labels.
            rules["groups"][0]["rules"].append({"alert": c["name"], "expr": metric + " + 0",
                                                "annotations": {"t": c["template"]}})
            test["alert_rule_test"].append({"eval_time": "0m", "alertname": c["name"], "exp_alerts": [
                {"exp_labels": dict(c["labels"]), "exp_annotations": {"t": c["output"]}}]})
        with open(os.path.join(self.dir, "rules.yml"), "w") as f:
            yaml.safe_dump(rules, f, allow_unicode=True)
        with open(os.path.join(self.dir, "test.yml"), "w") as f:
            yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [test]}, f,
                           allow_unicode=True)
        p = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], capture_output=True, text=True, cwd=self.dir,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertGreater(len(self.cases["cases"]), 30)

    def test_parse_errors_match_promtool_and_trainwatch(self):
        rules = {"groups": [{"name": "g", "rules": [
            {"alert": c["name"], "expr": "up", "annotations": {"t": c["template"]}}
            for c in self.cases["parse_errors"]]}]}
        path = os.path.join(self.dir, "parse.yml")
        with open(path, "w") as f:
            yaml.safe_dump(rules, f, allow_unicode=True)
        want = sorted('parse.yml: group "g", rule %d, "%s": annotation "t": %s' % (i + 1, c["name"], c["error"])
                      for i, c in enumerate(self.cases["parse_errors"]))
        for tool in ([PROMTOOL, "check", "rules"], [TRAINWATCH, "check", "rules"]):
            p = subprocess.run(tool + ["parse.yml"], capture_output=True, text=True, cwd=self.dir, timeout=60)
            self.assertEqual(p.returncode, 1, tool)
            self.assertEqual(error_lines(p.stderr), want, tool)


if __name__ == "__main__":
    TRAINWATCH = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:])
