#!/usr/bin/env python3
"""End-to-end test of `trainwatch import tensorboard LOGDIR` and
`trainwatch export run ID` against the real binary.

The event files are written here byte for byte the way
torch.utils.tensorboard.SummaryWriter writes them (its EventFileWriter):
TFRecord framing (uint64 length, masked CRC-32C of the length, the data,
masked CRC-32C of the data; CRC-32C computed in this file) around Event
protos encoded by hand: first the file_version "brain.Event:2" event, then
one event per add_scalar with a Summary.Value{tag, simple_value}. Also a
TF2-style scalar tensor (tf.summary.scalar: a DT_FLOAT rank-0 tensor, the
"scalars" plugin's metadata on the tag's first value only), histograms
(add_histogram's HistogramProto and TF2's [k, 3] tensor), images
(add_image's Summary.Image with a PNG made here, TF2's images-plugin string
tensor with two images), text (add_text's string tensor), hparams
(add_hparams' session start info: the run's config), audio (counted, not
imported), a second run directory and corrupt tails; the rich values are read
back through /api/v1/runs/histograms, /media and /media/keys, and `export
run` writes their index. When torch.utils.tensorboard can be imported (it
needs the tensorboard package), real SummaryWriter output is imported too;
otherwise that case is skipped.

Usage: import_tb_e2e_test.py /path/to/trainwatch [unittest args]
"""
import csv
import io
import json
import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.parse
import zlib

import twtest
from twtest import Server

T0 = 1700000000.0  # Nov 2023: older than any retention the server has


# ---- CRC-32C (Castagnoli) and TFRecord framing ----

def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


# ---- protobuf, by hand: event.proto, summary.proto, tensor.proto ----

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, b):
    return key(field, 2) + varint(len(b)) + b


def event(wall_time, step=0, file_version=None, summary=None):
    b = key(1, 1) + struct.pack("<d", wall_time)  # wall_time = 1 (double)
    if step:
        b += key(2, 0) + varint(step)  # step = 2 (int64)
    if file_version is not None:
        b += ld(3, file_version.encode())  # file_version = 3
    if summary is not None:
        b += ld(5, summary)  # summary = 5
    return b


def summary(*values):
    return b"".join(ld(1, v) for v in values)  # Summary.value = 1


def simple_value(tag, v):
    return ld(1, tag.encode()) + key(2, 5) + struct.pack("<f", v)  # tag = 1, simple_value = 2 (float)


def tf2_scalar(tag, v, metadata):
    # TensorProto: dtype = 1 (DT_FLOAT = 1), tensor_shape = 2 (rank 0: empty), float_val = 5 (packed)
    tensor = key(1, 0) + varint(1) + ld(2, b"") + ld(5, struct.pack("<f", v))
    b = ld(1, tag.encode()) + ld(8, tensor)
    if metadata:  # SummaryMetadata.plugin_data.plugin_name
        b += ld(9, ld(1, ld(1, b"scalars")))
    return b


def histogram(tag):
    # HistogramProto: min, max, num, sum, sum_squares, bucket_limit (packed), bucket (packed)
    h = b"".join(key(i, 1) + struct.pack("<d", x) for i, x in ((1, -1.0), (2, 1.0), (3, 4.0), (4, 0.0), (5, 2.0)))
    h += ld(6, struct.pack("<2d", 0.0, 1.0)) + ld(7, struct.pack("<2d", 2.0, 2.0))
    return ld(1, tag.encode()) + ld(5, h)


def histogram_tensor(tag, rows, metadata):
    # TF2's tf.summary.histogram: a DT_DOUBLE [k, 3] tensor of (left, right, count) in tensor_content.
    shape = ld(2, ld(2, key(1, 0) + varint(len(rows))) + ld(2, key(1, 0) + varint(3)))
    tensor = key(1, 0) + varint(2) + shape + ld(4, b"".join(struct.pack("<3d", *r) for r in rows))
    b = ld(1, tag.encode()) + ld(8, tensor)
    if metadata:
        b += ld(9, ld(1, ld(1, b"histograms")))
    return b


def string_tensor(tag, dims, strings, plugin=None, content=b""):
    # A DT_STRING (7) tensor: tensor_shape dims, string_val = 8.
    shape = b"".join(ld(2, key(1, 0) + varint(d)) for d in dims)
    tensor = key(1, 0) + varint(7) + ld(2, shape) + b"".join(ld(8, x) for x in strings)
    b = ld(1, tag.encode()) + ld(8, tensor)
    if plugin:
        b += ld(9, ld(1, ld(1, plugin) + ld(2, content)))
    return b


def png(width, height, rgb):
    """A PNG of width x height pixels of one colour (RGB, 8 bits), standard library only."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def image(tag, data, height, width):
    # Summary.Image: height = 1, width = 2, colorspace = 3, encoded_image_string = 4 (add_image).
    img = key(1, 0) + varint(height) + key(2, 0) + varint(width) + key(3, 0) + varint(3) + ld(4, data)
    return ld(1, tag.encode()) + ld(4, img)


def audio(tag):
    return ld(1, tag.encode()) + ld(6, key(1, 5) + struct.pack("<f", 16000.0))  # Summary.Audio: sample_rate


def hparams_start(hparams):
    # add_hparams: Value{tag "_hparams_/session_start_info", metadata{plugin "hparams", content =
    # HParamsPluginData{version 0, session_start_info = 3 {hparams = 1: map<string, google.protobuf.Value>}}}}.
    def value(v):
        if isinstance(v, bool):
            return key(4, 0) + varint(int(v))
        if isinstance(v, (int, float)):
            return key(2, 1) + struct.pack("<d", v)
        return ld(3, v.encode())
    entries = b"".join(ld(1, ld(1, k.encode()) + ld(2, value(v))) for k, v in hparams.items())
    content = key(1, 0) + varint(0) + ld(3, entries)
    return ld(1, b"_hparams_/session_start_info") + ld(9, ld(1, ld(1, b"hparams") + ld(2, content)))


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def event_file_name(n):
    # What SummaryWriter names its files: events.out.tfevents.<time>.<host>.<pid>.<n>
    return "events.out.tfevents.%d.%s.%d.%d" % (int(T0) + n, socket.gethostname(), os.getpid(), n)


class ImportTensorboardTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-import-tb-e2e-")
        self.logdir = os.path.join(self.tmp, "tblogs")
        os.makedirs(self.logdir)
        self.server = Server(os.path.join(self.tmp, "data")).start()
        self.url = "http://127.0.0.1:%d" % self.server.port

    def tearDown(self):
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get(self, path):
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body[:300])
        return json.loads(body)["data"]

    def run_cli(self, *args):
        p = subprocess.run([twtest.BINARY] + list(args), capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def run_import(self, logdir=None, *extra):
        return self.run_cli("import", "tensorboard", logdir or self.logdir, "--url", self.url, *extra)

    def runs_by_name(self):
        runs = self.get("/api/v1/runs?filter=" + urllib.parse.quote('id =~ "tb-.*"'))
        return {r["name"]: r for r in runs}

    def write_logdir(self):
        """Run "tblogs" (files directly in the logdir) and run "seeds/s1" (a subdirectory)."""
        want = {}
        # tblogs: add_scalar("train/loss", ...) every step, add_scalar("lr", ...) every 10th,
        # a NaN, a histogram, and a TF2 scalar tensor.
        b = record(event(T0, file_version="brain.Event:2"))
        loss, lr, acc = {}, {}, {}
        for s in range(300):
            wt = T0 + 1 + s * 0.5
            v = float("nan") if s == 13 else 4.0 / (1 + s)
            b += record(event(wt, s, summary=summary(simple_value("train/loss", v))))
            loss[s] = ("NaN" if s == 13 else f32(v), round(wt * 1000))
            if s % 10 == 0:
                b += record(event(wt, s, summary=summary(simple_value("lr", 3e-4 * (1 - s / 300)))))
                lr[s] = (f32(3e-4 * (1 - s / 300)), round(wt * 1000))
        b += record(event(T0 + 200, 299, summary=summary(histogram("weights"))))
        for s in (100, 200, 300):
            b += record(event(T0 + 201 + s / 100, s, summary=summary(tf2_scalar("eval/acc", s / 400.0, s == 100))))
            acc[s] = (s / 400.0, round((T0 + 201 + s / 100) * 1000))
        # Rich values: histograms, images, text, hparams (the config), and audio (not imported).
        b += record(event(T0 + 1, 0, summary=summary(hparams_start({"lr": 3e-4, "optimizer": "adamw", "amp": True}))))
        red, blue = png(3, 2, (255, 0, 0)), png(4, 5, (0, 0, 255))
        b += record(event(T0 + 100, 100, summary=summary(image("samples", red, 2, 3))))
        b += record(event(T0 + 150, 200, summary=summary(image("samples", blue, 5, 4))))
        b += record(event(T0 + 150, 200, summary=summary(
            string_tensor("generated", [4], [b"4", b"5", blue, red], b"images"))))
        b += record(event(T0 + 150, 200, summary=summary(
            histogram_tensor("act", [(0.0, 0.5, 3.0), (0.5, 1.0, 1.0)], True))))
        b += record(event(T0 + 151, 250, summary=summary(
            histogram_tensor("act", [(0.0, 1.0, 7.0)], False))))  # the plugin remembered from the tag's first value
        b += record(event(T0 + 152, 10, summary=summary(string_tensor("notes", [1], [b"**hello**"], b"text"))))
        b += record(event(T0 + 152, 20, summary=summary(string_tensor("notes", [2], [b"a", b"b"]))))
        b += record(event(T0 + 152, 20, summary=summary(
            string_tensor("preds", [2, 2], [b"x", b"y", b"1", b"2"], b"text"))))
        b += record(event(T0 + 153, 20, summary=summary(audio("speech"))))
        with open(os.path.join(self.logdir, event_file_name(0)), "wb") as f:
            f.write(b)
        want["tblogs"] = {"train/loss": loss, "lr": lr, "eval/acc": acc, "start": T0, "end": T0 + 204,
                          "images": {"samples": {100: red, 200: blue}, "generated": {200: blue},
                                     "generated/1": {200: red}}}

        # seeds/s1: two files (a restart), the first with a corrupt record inside, the second cut short.
        d = os.path.join(self.logdir, "seeds", "s1")
        os.makedirs(d)
        first = record(event(T0 + 1000, file_version="brain.Event:2"))
        for s in range(5):
            first += record(event(T0 + 1001 + s, s, summary=summary(simple_value("loss", 1.0 + s))))
        bad_offset = len(first)
        corrupt = bytearray(record(event(T0 + 1006, 5, summary=summary(simple_value("loss", 99.0)))))
        corrupt[-1] ^= 0xFF  # the data's CRC
        first += bytes(corrupt) + record(event(T0 + 1007, 6, summary=summary(simple_value("loss", 98.0))))
        with open(os.path.join(d, event_file_name(1)), "wb") as f:
            f.write(first)
        second = record(event(T0 + 2000, file_version="brain.Event:2"))
        for s in range(5, 8):
            second += record(event(T0 + 2000 + s, s, summary=summary(simple_value("loss", 10.0 + s))))
        cut_offset = len(second)
        second += record(event(T0 + 2010, 8, summary=summary(simple_value("loss", 18.0))))[:-5]
        with open(os.path.join(d, event_file_name(2)), "wb") as f:
            f.write(second)
        s1 = {s: (1.0 + s, round((T0 + 1001 + s) * 1000)) for s in range(5)}
        s1.update({s: (10.0 + s, round((T0 + 2000 + s) * 1000)) for s in range(5, 8)})
        want["seeds/s1"] = {"loss": s1, "start": T0 + 1000, "end": T0 + 2007,
                            "bad": (os.path.join(d, event_file_name(1)), bad_offset),
                            "cut": (os.path.join(d, event_file_name(2)), cut_offset)}
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not an event file\n")
        return want

    def check_rich(self, run_id, images):
        """The rich values of run "tblogs", read back through the media routes."""
        keys = self.get("/api/v1/runs/media/keys?ids=" + run_id)
        got = {k["key"]: (k["kind"], k["steps"], k["first_step"], k["last_step"]) for k in keys}
        self.assertEqual(got, {
            "weights": ("histogram", 1, 299, 299), "act": ("histogram", 2, 200, 250),
            "samples": ("image", 2, 100, 200), "generated": ("image", 1, 200, 200),
            "generated/1": ("image", 1, 200, 200), "notes": ("text", 2, 10, 20), "preds": ("table", 1, 20, 20)})
        for k in keys:
            self.assertEqual(k["run"], run_id)

        h = self.get("/api/v1/runs/histograms?ids=%s&key=weights" % run_id)
        self.assertEqual(len(h), 1)
        self.assertEqual((h[0]["step"], h[0]["timestamp"]), (299, round((T0 + 200) * 1000)))
        # HistogramProto min -1, max 1, limits [0, 1], counts [2, 2]: the first bucket from min.
        self.assertEqual(h[0]["buckets"], [[-1, 0, 2], [0, 1, 2]])
        h = self.get("/api/v1/runs/histograms?ids=%s&key=act" % run_id)
        self.assertEqual([(x["step"], x["buckets"]) for x in h], [(200, [[0, 0.5, 3], [0.5, 1, 1]]), (250, [[0, 1, 7]])])

        for key_, by_step in images.items():
            media = self.get("/api/v1/runs/media?ids=%s&key=%s" % (run_id, urllib.parse.quote(key_, safe="")))
            self.assertEqual([m["step"] for m in media], sorted(by_step), key_)
            for m in media:
                data = by_step[m["step"]]
                self.assertEqual((m["kind"], m["format"], m["bytes"]), ("image", "png", len(data)), key_)
                w, hgt = struct.unpack(">II", data[16:24])
                self.assertEqual((m["width"], m["height"]), (w, hgt))
                status, body = self.server.request("GET", m["url"])
                self.assertEqual((status, body), (200, data), key_)

        notes = self.get("/api/v1/runs/media?ids=%s&key=notes" % run_id)
        self.assertEqual([(m["step"], m["kind"], m["text"]) for m in notes], [(10, "text", "**hello**"), (20, "text", "a\nb")])
        preds = self.get("/api/v1/runs/media?ids=%s&key=preds" % run_id)
        self.assertEqual((preds[0]["kind"], preds[0]["columns"], preds[0]["rows"]), ("table", ["0", "1"], [["x", "y"], ["1", "2"]]))

    def check_history(self, run_id, tags):
        hist = {h["key"]: h for h in self.get("/api/v1/runs/%s/history" % run_id)}
        self.assertEqual(sorted(hist), sorted(tags))
        for tag, pts in tags.items():
            h = hist[tag]
            self.assertEqual(h["labels"], {})
            self.assertEqual(h["steps"], sorted(pts), tag)
            self.assertEqual(h["values"], [pts[s][0] for s in sorted(pts)], tag)
            self.assertEqual(h["timestamps"], [pts[s][1] for s in sorted(pts)], tag)
        return hist

    def test_logdir_becomes_runs_with_every_step_then_export(self):
        want = self.write_logdir()
        rc, out, err = self.run_import()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("2 runs", out)
        self.assertIn("1 audio values not imported", out)
        self.assertNotIn("histogram values not imported", out)
        bad_path, bad_offset = want["seeds/s1"]["bad"]
        cut_path, cut_offset = want["seeds/s1"]["cut"]
        self.assertIn("%s: offset %d: corrupt record" % (bad_path, bad_offset), err)
        self.assertIn("%s: offset %d: truncated record" % (cut_path, cut_offset), err)

        runs = self.runs_by_name()
        self.assertEqual(sorted(runs), ["seeds/s1", "tblogs"])
        for name, w in want.items():
            r = runs[name]
            self.assertRegex(r["id"], r"^tb-[0-9a-f]{16}$")
            self.assertEqual((r["project"], r["status"]), ("tblogs", "finished"))
            self.assertAlmostEqual(r["start_time"], w["start"], places=3)
            self.assertAlmostEqual(r["end_time"], w["end"], places=3)
            self.check_history(r["id"], {k: v for k, v in w.items() if isinstance(v, dict) and k != "images"})
        main = runs["tblogs"]
        self.assertEqual(main["summary"]["eval/acc"], 0.75)
        self.assertEqual(main["config"], {"lr": 3e-4, "optimizer": "adamw", "amp": True})  # add_hparams
        self.assertEqual(runs["seeds/s1"]["config"], {})
        self.check_rich(main["id"], want["tblogs"]["images"])

        # Again: nothing stored twice, the same two runs.
        rc, out, err = self.run_import()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("(0 stored now", out)
        self.assertEqual(sorted(self.runs_by_name()), ["seeds/s1", "tblogs"])
        self.check_history(main["id"], {k: v for k, v in want["tblogs"].items() if isinstance(v, dict) and k != "images"})
        self.check_rich(main["id"], want["tblogs"]["images"])

        # trainwatch export run ID: ID.json, ID.csv, ID.jsonl, ID.media.jsonl.
        out_dir = os.path.join(self.tmp, "export")
        rc, out, err = self.run_cli("export", "run", main["id"], "--url", self.url, "--out", out_dir)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(os.listdir(out_dir)),
                         sorted(main["id"] + ext for ext in (".csv", ".json", ".jsonl", ".media.jsonl")))
        with open(os.path.join(out_dir, main["id"] + ".media.jsonl")) as f:
            index = [json.loads(line) for line in f]
        got = sorted((m["key"], m["step"], m["kind"]) for m in index)
        self.assertEqual(got, sorted([("weights", 299, "histogram"), ("act", 200, "histogram"), ("act", 250, "histogram"),
                                      ("samples", 100, "image"), ("samples", 200, "image"), ("generated", 200, "image"),
                                      ("generated/1", 200, "image"), ("notes", 10, "text"), ("notes", 20, "text"),
                                      ("preds", 20, "table")]))
        for m in index:
            self.assertEqual((m["run"], m["rank"]), (main["id"], None))
            self.assertNotIn("data", m)
            if m["kind"] == "image":
                status, body = self.server.request("GET", m["url"])
                self.assertEqual((status, body), (200, want["tblogs"]["images"][m["key"]][m["step"]]))
            if m["key"] == "preds":
                self.assertEqual(m["rows"], [["x", "y"], ["1", "2"]])
        with open(os.path.join(out_dir, main["id"] + ".json")) as f:
            run = json.load(f)
        self.assertEqual((run["id"], run["name"], run["project"], run["status"]), (main["id"], "tblogs", "tblogs", "finished"))
        for field in ("config", "summary", "tags", "alerts"):
            self.assertIn(field, run)
        self.assertEqual(run["summary"]["lr"], want["tblogs"]["lr"][290][0])

        points = [(k, s, v[0], v[1]) for k in ("train/loss", "lr", "eval/acc") for s, v in want["tblogs"][k].items()]
        points.sort(key=lambda p: (p[0], p[1]))
        with open(os.path.join(out_dir, main["id"] + ".csv"), newline="") as f:
            text = f.read()
        self.assertTrue(text.startswith("rank,key,step,timestamp,value\n"), text[:100])
        rows = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(len(rows), len(points))
        got = sorted((r["key"], int(r["step"]), r["value"], r["timestamp"], r["rank"]) for r in rows)
        for (k, s, v, ts), (gk, gs, gv, gts, grank) in zip(points, got):
            self.assertEqual((gk, gs, grank), (k, s, ""))
            self.assertEqual(gv if v == "NaN" else float(gv), v, (k, s))
            self.assertEqual(gts, "%d.%03d" % (ts // 1000, ts % 1000))

        with open(os.path.join(out_dir, main["id"] + ".jsonl")) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), len(points))
        for line in lines:
            self.assertEqual(sorted(line), ["key", "rank", "step", "timestamp", "value"])
            self.assertIsNone(line["rank"])
        got = sorted((x["key"], x["step"], x["value"], x["timestamp"]) for x in lines)
        self.assertEqual(got, [(k, s, v, ts) for k, s, v, ts in points])

    def test_project_flag_empty_logdir_and_unknown_export(self):
        d = os.path.join(self.tmp, "other")
        os.makedirs(os.path.join(d, "a"))
        with open(os.path.join(d, "a", event_file_name(0)), "wb") as f:
            f.write(record(event(T0, file_version="brain.Event:2")) +
                    record(event(T0 + 1, 1, summary=summary(simple_value("loss", 0.5)))))
        rc, out, err = self.run_import(d, "--project", "imported")
        self.assertEqual(rc, 0, out + err)
        r = self.runs_by_name()["a"]
        self.assertEqual(r["project"], "imported")
        self.assertEqual(self.get("/api/v1/runs/%s/history" % r["id"])[0]["values"], [0.5])

        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        rc, out, err = self.run_import(empty)
        self.assertEqual(rc, 1)
        self.assertIn("no TensorBoard event file", err)

        rc, out, err = self.run_cli("export", "run", "no-such-run", "--url", self.url, "--out", os.path.join(self.tmp, "x"))
        self.assertEqual(rc, 1)
        self.assertIn("not found", err)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "x")), [])

    def test_real_summary_writer_output(self):
        try:
            from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package
        except Exception as e:  # ImportError, or a tensorboard that does not load
            self.skipTest("torch.utils.tensorboard unavailable: %s" % e)
        import torch
        d = os.path.join(self.logdir, "torch")
        w = SummaryWriter(log_dir=d)
        for s in range(50):
            w.add_scalar("train/loss", 1.0 / (1 + s), s, walltime=T0 + s)
            w.add_scalar("acc", s / 50.0, s, walltime=T0 + s, new_style=True)  # a scalar tensor, plugin "scalars"
        for s in range(3):
            w.add_histogram("weights", torch.arange(10, dtype=torch.float32) * (s + 1), s, walltime=T0 + s)
        w.add_text("notes", "hello", 0, walltime=T0)
        w.add_text("notes", "again", 1, walltime=T0 + 1)
        try:
            import PIL  # noqa: F401  add_image encodes with Pillow
            has_pil = True
        except ImportError:
            has_pil = False
        if has_pil:
            w.add_image("sample", torch.zeros(3, 4, 5), 0, walltime=T0)  # CHW floats: a 5x4 PNG
        # run_name=".": the hparams' event file in the same directory (the default is a subdirectory).
        w.add_hparams({"lr": 0.01, "optimizer": "sgd", "bs": 32}, {"hparam/acc": 0.9}, run_name=".")
        w.close()
        rc, out, err = self.run_import()
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("not imported", out)
        r = self.runs_by_name()["torch"]
        self.assertEqual(r["status"], "finished")
        self.assertEqual(r["config"], {"lr": 0.01, "optimizer": "sgd", "bs": 32})
        keys = {k["key"]: (k["kind"], k["steps"]) for k in self.get("/api/v1/runs/media/keys?ids=" + r["id"])}
        want_keys = {"weights": ("histogram", 3), "notes": ("text", 2)}
        if has_pil:
            want_keys["sample"] = ("image", 1)
        self.assertEqual(keys, want_keys)
        h = self.get("/api/v1/runs/histograms?ids=%s&key=weights" % r["id"])
        self.assertEqual([x["step"] for x in h], [0, 1, 2])
        for s, x in enumerate(h):
            self.assertEqual(sum(b[2] for b in x["buckets"]), 10)
            self.assertEqual((x["buckets"][0][0], x["buckets"][-1][1]), (0, 9 * (s + 1)))  # min and max
            for lo, hi, _ in x["buckets"]:
                self.assertLessEqual(lo, hi)
        notes = self.get("/api/v1/runs/media?ids=%s&key=notes" % r["id"])
        self.assertEqual([m["text"] for m in notes], ["hello", "again"])
        if has_pil:
            img = self.get("/api/v1/runs/media?ids=%s&key=sample" % r["id"])
            self.assertEqual((img[0]["format"], img[0]["width"], img[0]["height"]), ("png", 5, 4))
        hist = {h["key"]: h for h in self.get("/api/v1/runs/%s/history" % r["id"])}
        self.assertEqual(sorted(hist), ["acc", "hparam/acc", "train/loss"])  # add_hparams logs its metrics as scalars
        self.assertEqual(hist["train/loss"]["steps"], list(range(50)))
        self.assertEqual(hist["train/loss"]["values"], [f32(1.0 / (1 + s)) for s in range(50)])
        self.assertEqual(hist["train/loss"]["timestamps"], [round((T0 + s) * 1000) for s in range(50)])
        self.assertEqual(hist["acc"]["values"], [f32(s / 50.0) for s in range(50)])
        rc, out, err = self.run_import()
        self.assertIn("(0 stored now", out)


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    if len(sys.argv) < 2:
        sys.exit("usage: import_tb_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
