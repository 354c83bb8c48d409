"""The content hashes run.log_artifact() records (standard library only).

A file: the SHA-256 of its bytes, read in pieces. A directory: a manifest,
every file under it (at any depth, symbolic links to files followed, links
to directories not) as {"path": relative path with "/", "sha256", "size"},
sorted by path, written as
json.dumps(manifest, sort_keys=True, separators=(",", ":")) (ASCII, UTF-8);
the directory's sha256 is the SHA-256 of that text and its size the sum of
the files' sizes. The same tree gives the same digest on any machine.
"""
import hashlib
import json
import os

__all__ = ["file_digest", "directory_manifest", "manifest_digest"]

PIECE = 1 << 20


def file_digest(path):
    """(sha256 hex, size in bytes) of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            piece = f.read(PIECE)
            if not piece:
                break
            h.update(piece)
            size += len(piece)
    return h.hexdigest(), size


def directory_manifest(path):
    """[{"path", "sha256", "size"}, ...] of every file under directory `path`, sorted by path."""
    out = []
    root = os.path.abspath(path)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not os.path.isfile(full):  # a dangling link, a socket, a fifo
                continue
            digest, size = file_digest(full)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            out.append({"path": rel, "sha256": digest, "size": size})
    out.sort(key=lambda e: e["path"])
    return out


def manifest_digest(manifest):
    """(sha256 hex of the manifest's JSON, total size) of a directory_manifest()."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), sum(e["size"] for e in manifest)
