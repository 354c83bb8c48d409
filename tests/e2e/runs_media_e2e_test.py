#!/usr/bin/env python3
"""End-to-end test of rich run values and artifacts (docs/runs-api.md "Rich
values" and "Artifacts", issue 20) over plain HTTP against the real binary:
histograms, images, text and tables in batches, their read routes, malformed
values named in `rejected` beside stored ones, a kill -9 and restart with
everything acknowledged still there; artifacts logged, uploaded (SHA-256
checked), used, downloaded, deleted, and removed by --runs.artifact-keep-versions.

Usage: runs_media_e2e_test.py /path/to/trainwatch [unittest args]
"""
import base64
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import unittest
import urllib.parse
import zlib

import twtest
from twtest import Server


def png(width, height, rgb=(255, 0, 0)):
    """A real PNG of one colour (standard library only)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class MediaTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-media-e2e-")
        self.data = os.path.join(self.tmp, "data")
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *extra):
        self.server = Server(self.data, extra_args=list(extra)).start()
        return self.server

    def raw(self, method, path, body=None, ctype="application/json"):
        return self.server.request(method, path, body=body, headers={"Content-Type": ctype})

    def call(self, method, path, obj=None, want=200):
        status, data = self.raw(method, path, json.dumps(obj).encode() if obj is not None else None)
        self.assertEqual(status, want, "%s %s: %r" % (method, path, data[:500]))
        return json.loads(data) if data else None

    def test_rich_values_round_trip_and_survive_kill9(self):
        self.start()
        self.call("POST", "/api/v1/runs", {"id": "r1", "project": "p", "name": "one"})
        image = png(4, 3)
        points = []
        for step in range(0, 50, 5):
            points.append({"step": step, "ts": int(time.time() * 1000), "values": {
                "loss": 1.0 / (step + 1),
                "weights/fc": {"_type": "histogram", "buckets": [[-1, 0, step], [0, 1, 50 - step]]},
                "samples": {"_type": "image", "format": "png", "data": base64.b64encode(image).decode(),
                            "caption": "step %d" % step},
                "notes": {"_type": "text", "text": "# Step %d\n*ok*" % step},
                "preds": {"_type": "table", "columns": ["id", "label", "p"], "rows": [[1, "cat", 0.9], [2, None, True]]},
            }})
        # Malformed values are named and the rest of the point stays.
        points.append({"step": 60, "ts": int(time.time() * 1000), "values": {
            "loss": 0.01,
            "bad_hist": {"_type": "histogram", "buckets": [[1, 0, 1]]},
            "bad_img": {"_type": "image", "format": "png", "data": base64.b64encode(b"GIF89a....").decode()},
            "bad_type": {"_type": "video"},
            "bad_table": {"_type": "table", "columns": ["a"], "rows": [[1, 2]]},
        }})
        doc = self.call("POST", "/api/v1/runs/r1/batches", {"batch_id": "b1", "points": points})["data"]
        self.assertEqual(doc["accepted"], 10 * 5 + 1)
        errors = {r["key"]: r["error"] for r in doc["rejected"]}
        self.assertIn("buckets[0]: lower is above upper", errors["bad_hist"])
        self.assertIn("not a PNG", errors["bad_img"])
        self.assertIn('unknown type "video"', errors["bad_type"])
        self.assertIn("rows[0]: expected an array of 1 cells", errors["bad_table"])
        # A key keeps its kind.
        doc = self.call("POST", "/api/v1/runs/r1/batches", {"batch_id": "b2", "points": [
            {"step": 70, "ts": int(time.time() * 1000), "values": {"notes": {"_type": "histogram", "buckets": [[0, 1, 1]]}}}]})
        self.assertEqual(doc["data"]["accepted"], 0)
        self.assertIn("the key holds text values", doc["data"]["rejected"][0]["error"])

        self.server.kill9()
        self.start()

        keys = self.call("GET", "/api/v1/runs/media/keys?ids=r1")["data"]
        self.assertEqual([(k["key"], k["kind"], k["steps"]) for k in keys],
                         [("notes", "text", 10), ("preds", "table", 10), ("samples", "image", 10), ("weights/fc", "histogram", 10)])
        hist = self.call("GET", "/api/v1/runs/histograms?ids=r1&key=" + urllib.parse.quote("weights/fc", safe="") +
                         "&points=4")["data"]
        self.assertEqual([h["step"] for h in hist], [0, 15, 30, 45])
        self.assertEqual(hist[-1]["buckets"], [[-1, 0, 45], [0, 1, 5]])
        self.assertEqual(len(self.call("GET", "/api/v1/runs/histograms?ids=r1&key=weights/fc")["data"]), 10)

        at = self.call("GET", "/api/v1/runs/media?ids=r1&key=samples&step=22")["data"]
        self.assertEqual(len(at), 1)
        self.assertEqual((at[0]["step"], at[0]["width"], at[0]["height"], at[0]["caption"]), (20, 4, 3, "step 20"))
        status, body = self.raw("GET", at[0]["url"])
        self.assertEqual(status, 200)
        self.assertEqual(body, image)
        text = self.call("GET", "/api/v1/runs/media?ids=r1&key=notes&start=40")["data"]
        self.assertEqual([(t["step"], t["text"]) for t in text], [(40, "# Step 40\n*ok*"), (45, "# Step 45\n*ok*")])
        table = self.call("GET", "/api/v1/runs/media?ids=r1&key=preds&step=0")["data"][0]
        self.assertEqual(table["columns"], ["id", "label", "p"])
        self.assertEqual(table["rows"], [[1, "cat", 0.9], [2, None, True]])

        # Errors name the parameter; unknown content is a 404.
        self.assertIn("missing parameter \\\"key\\\"", self.raw("GET", "/api/v1/runs/media?ids=r1")[1].decode())
        self.call("GET", "/api/v1/runs/r1/media/content?key=samples&step=21", want=404)
        self.call("GET", "/api/v1/runs/histograms?ids=r1&key=weights/fc&points=0", want=400)
        # The reserved ids.
        self.call("POST", "/api/v1/runs", {"id": "media", "project": "p"}, want=400)

    def test_artifacts_versions_lineage_content_and_policy(self):
        self.start("--runs.artifact-keep-versions", "1")
        self.call("POST", "/api/v1/runs", {"id": "train", "project": "p", "name": "train"})
        self.call("POST", "/api/v1/runs", {"id": "eval", "project": "p", "name": "eval"})

        def log(content, uri):
            return self.call("POST", "/api/v1/runs/train/artifacts", {
                "name": "model", "type": "model", "sha256": hashlib.sha256(content).hexdigest(),
                "size": len(content), "uri": uri, "metadata": {"epoch": 1}})["data"]

        v0 = log(b"checkpoint-0", "file:///ckpt/0.pt")
        self.assertEqual((v0["version"], v0["stored"], v0["producer"]), (0, False, "train"))
        self.assertEqual(log(b"checkpoint-0", "file:///ckpt/0.pt")["id"], v0["id"])
        # Referenced only: no content to download.
        self.call("GET", "/api/v1/artifacts/%d/content" % v0["id"], want=404)
        # An upload whose bytes differ from the SHA-256 is refused and nothing kept.
        status, body = self.raw("PUT", "/api/v1/artifacts/%d/content" % v0["id"], b"checkpoint-X", "application/octet-stream")
        self.assertEqual(status, 400, body)
        self.assertIn("SHA-256", body.decode())
        status, body = self.raw("PUT", "/api/v1/artifacts/%d/content" % v0["id"], b"checkpoint-0", "application/octet-stream")
        self.assertEqual(status, 200, body)
        self.assertTrue(json.loads(body)["data"]["stored"])
        status, body = self.raw("GET", "/api/v1/artifacts/%d/content" % v0["id"])
        self.assertEqual((status, body), (200, b"checkpoint-0"))

        used = self.call("POST", "/api/v1/runs/eval/artifacts/use", {"name": "model", "version": "v0"})["data"]
        self.assertEqual(used["consumers"], ["eval"])
        self.call("POST", "/api/v1/runs/eval/artifacts/use", {"name": "nope"}, want=404)
        self.call("POST", "/api/v1/runs/train/artifacts", {"name": "a/b", "sha256": "0" * 64, "size": 1}, want=400)

        # Keep 1 version: v0 is used by a running run and stays ...
        v1 = log(b"checkpoint-1", "file:///ckpt/1.pt")
        self.raw("PUT", "/api/v1/artifacts/%d/content" % v1["id"], b"checkpoint-1", "application/octet-stream")
        self.assertTrue(self.call("GET", "/api/v1/artifacts/%d" % v0["id"])["data"]["stored"])
        # ... until that run ends and the next version comes.
        self.call("POST", "/api/v1/runs/eval/finish", {"status": "finished"})
        v2 = log(b"checkpoint-2", "file:///ckpt/2.pt")
        for old in (v0, v1):
            gone = self.call("GET", "/api/v1/artifacts/%d" % old["id"])["data"]
            self.assertEqual((gone["stored"], gone["deleted"]), (False, True))
        self.raw("PUT", "/api/v1/artifacts/%d/content" % v2["id"], b"checkpoint-2", "application/octet-stream")
        self.call("GET", "/api/v1/artifacts/%d/content" % v0["id"], want=404)

        versions = self.call("GET", "/api/v1/artifacts?project=p&name=model")["data"]
        self.assertEqual([v["version"] for v in versions], [2, 1, 0])
        self.assertEqual(versions[2]["consumers"], ["eval"])
        mine = self.call("GET", "/api/v1/runs/train/artifacts")["data"]
        self.assertEqual([v["version"] for v in mine["logged"]], [0, 1, 2])
        self.assertEqual([v["version"] for v in self.call("GET", "/api/v1/runs/eval/artifacts")["data"]["used"]], [0])

        # Deleted by hand after a restart; the version stays.
        self.server.kill9()
        self.start("--runs.artifact-keep-versions", "1")
        status, body = self.raw("GET", "/api/v1/artifacts/%d/content" % v2["id"])
        self.assertEqual((status, body), (200, b"checkpoint-2"))
        self.assertTrue(self.call("DELETE", "/api/v1/artifacts/%d/content" % v2["id"])["data"]["deleted"])
        self.call("GET", "/api/v1/artifacts/%d/content" % v2["id"], want=404)
        self.assertEqual(os.listdir(os.path.join(self.data, "artifacts")), [])
        self.call("GET", "/api/v1/artifacts/999", want=404)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: runs_media_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
