"""A small keep-alive HTTP client (standard library) for the trainwatch API."""
import http.client
import json
import urllib.parse


class Unreachable(Exception):
    """The server could not be reached, or the connection broke mid-request."""


class Http:
    """One persistent connection to the server at `url`; reconnects as needed.

    Not thread-safe: each user (the sender thread, init) has its own.
    """

    def __init__(self, url, timeout=10.0):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme not in ("http", "https"):
            raise ValueError("trainwatch url %r: scheme must be http or https" % url)
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        self._conn = None

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method, path, body=None, content_type="application/json"):
        """Sends one request: (status, parsed JSON or raw bytes). Raises Unreachable."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        elif isinstance(body, str):
            body = body.encode()
        headers = {"Content-Type": content_type} if body is not None else {}
        for attempt in (0, 1):  # a kept-alive connection the server closed: retry once on a fresh one
            fresh = self._conn is None
            if fresh:
                cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
                self._conn = cls(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, self.prefix + path, body=body, headers=headers)
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if fresh or attempt == 1:
                    raise Unreachable(str(e) or e.__class__.__name__) from None
                continue
            if data and resp.getheader("Content-Type", "").startswith("application/json"):
                try:
                    return resp.status, json.loads(data)
                except ValueError:
                    pass
            return resp.status, data
        raise Unreachable("unreachable")  # not reached


def error_text(status, doc):
    """The server's error message from an answer, for warnings."""
    if isinstance(doc, dict) and doc.get("error"):
        return "%d %s" % (status, doc["error"])
    if isinstance(doc, bytes):
        return "%d %s" % (status, doc[:300].decode("utf-8", "replace").strip())
    return str(status)
