"""A small keep-alive HTTP/1.1 client (standard library) for the trainwatch API."""
import base64
import json
import os
import socket
import urllib.parse


class Unreachable(Exception):
    """The server could not be reached, or the connection broke mid-request."""


SEND_PIECE = 1 << 20  # a body larger than this is sent in pieces of it


class _BodyError(Exception):
    """The file being sent could not be read as announced (not a network fault)."""


class Http:
    """One persistent connection to the server at `url`; reconnects as needed.

    HTTP/1.1 over a plain (or TLS-wrapped) socket rather than http.client:
    one send per request and no email-module header parsing, which was
    about half of the sender thread's CPU per batch (docs/performance.md).
    Not thread-safe: each user (the sender thread, init) has its own.

    A server behind a web config or a tokens file (docs/security.md): basic
    auth from the URL's userinfo (http://user:pass@host:9800), else
    `username`/`password`, else the bearer token `token` or
    $TRAINWATCH_TOKEN, else $TRAINWATCH_USERNAME/$TRAINWATCH_PASSWORD; for
    https, the CA file `ca_file` or $TRAINWATCH_CA_FILE (else the system's
    CAs).
    """

    def __init__(self, url, timeout=10.0, username=None, password=None, ca_file=None, token=None):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme not in ("http", "https"):
            raise ValueError("trainwatch url %r: scheme must be http or https" % url)
        self.scheme = u.scheme
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        default_port = 443 if u.scheme == "https" else 80
        host = "[%s]" % self.host if ":" in self.host else self.host
        self._host_header = host if self.port == default_port else "%s:%d" % (host, self.port)
        self._sock = None
        self._buf = b""  # bytes read past the end of the last response
        if u.username is not None:
            username, password = urllib.parse.unquote(u.username), urllib.parse.unquote(u.password or "")
        elif username is None:
            token = token or os.environ.get("TRAINWATCH_TOKEN")
            if not token:
                username = os.environ.get("TRAINWATCH_USERNAME")
                password = os.environ.get("TRAINWATCH_PASSWORD", "")
        self._auth = ""
        if username:
            cred = base64.b64encode(("%s:%s" % (username, password or "")).encode()).decode()
            self._auth = "Authorization: Basic %s\r\n" % cred
        elif token:
            if any(c in token for c in "\r\n"):
                raise ValueError("trainwatch token: must be one line")
            self._auth = "Authorization: Bearer %s\r\n" % token
        self.ca_file = ca_file or os.environ.get("TRAINWATCH_CA_FILE") or None

    def close(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        self._buf = b""

    def _connect(self):
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.scheme == "https":
            import ssl  # only where https is used: some Python builds lack it
            sock = ssl.create_default_context(cafile=self.ca_file).wrap_socket(sock, server_hostname=self.host)
        self._sock = sock

    def _read(self):
        data = self._sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by the server")
        return data

    def _until(self, sep):
        """Bytes up to and without `sep`, read as needed."""
        while True:
            i = self._buf.find(sep)
            if i >= 0:
                out, self._buf = self._buf[:i], self._buf[i + len(sep):]
                return out
            if len(self._buf) > (1 << 20):
                raise ValueError("response header too long")
            self._buf += self._read()

    def _exactly(self, n):
        while len(self._buf) < n:
            self._buf += self._read()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_file(self, f, start, length):
        try:
            f.seek(start)
        except OSError as e:
            raise _BodyError("cannot read %s: %s" % (getattr(f, "name", "the file"), e)) from None
        left = length
        while left > 0:
            try:
                piece = f.read(min(SEND_PIECE, left))
            except OSError as e:
                raise _BodyError("cannot read %s: %s" % (getattr(f, "name", "the file"), e)) from None
            if not piece:
                raise _BodyError("%s shrank while it was sent" % getattr(f, "name", "the file"))
            self._sock.sendall(piece)
            left -= len(piece)

    def _response(self, method):
        """(status, headers with lowercase names, body bytes) of one response."""
        while True:
            head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
            parts = head[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise ValueError("bad status line %r" % head[0][:100])
            status = int(parts[1])
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if status >= 200 or status == 101:
                break  # 1xx interim answers (100 Continue) are skipped
        keep = parts[0] == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = int(self._until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    while self._until(b"\r\n"):  # trailers
                        pass
                    break
                chunks.append(self._exactly(size))
                self._exactly(2)
            body = b"".join(chunks)
        elif "content-length" in headers:
            body = self._exactly(int(headers["content-length"]))
        else:  # delimited by the end of the connection
            chunks = [self._buf]
            self._buf = b""
            while True:
                data = self._sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
            body = b"".join(chunks)
            keep = False
        if not keep or self._buf:
            self.close()  # not reusable (or out of step): the next request connects afresh
        return status, headers, body

    def request(self, method, path, body=None, content_type="application/json", headers=None):
        """Sends one request: (status, parsed JSON or raw bytes). Raises Unreachable.

        body: a dict or list (as JSON), str, bytes, or a binary file opened
        for reading, sent from its current position to its end in pieces
        (never whole in memory; a retry seeks back). headers: more request
        headers, {name: value} (one line each)."""
        stream = start = None
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        elif isinstance(body, str):
            body = body.encode()
        elif hasattr(body, "read"):
            stream, start = body, body.tell()
            length = os.fstat(stream.fileno()).st_size - start
        head = "%s %s HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: identity\r\n%s" % (
            method, self.prefix + path, self._host_header, self._auth)
        for name, value in (headers or {}).items():
            if any(c in str(name) + str(value) for c in "\r\n"):
                raise ValueError("trainwatch: header %r: must be one line" % name)
            head += "%s: %s\r\n" % (name, value)
        if stream is not None:
            head += "Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type, length)
            body = None
        elif body is not None:
            head += "Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type, len(body))
        head = (head + "\r\n").encode("latin-1")
        if stream is None and (body is None or len(body) <= SEND_PIECE):
            msg, body = head + (body or b""), None  # one send: what almost every request is
        else:
            msg = head
        for attempt in (0, 1):  # a kept-alive connection the server closed: retry once on a fresh one
            fresh = self._sock is None
            try:
                if fresh:
                    self._connect()
                self._sock.sendall(msg)
                if body is not None:  # large: in pieces, each within the timeout
                    view = memoryview(body)
                    for off in range(0, len(view), SEND_PIECE):
                        self._sock.sendall(view[off:off + SEND_PIECE])
                elif stream is not None:
                    self._send_file(stream, start, length)
                status, headers, data = self._response(method)
            except _BodyError as e:
                self.close()
                raise ValueError(str(e)) from None
            except (OSError, ValueError) as e:
                self.close()
                if fresh or attempt == 1:
                    raise Unreachable(str(e) or e.__class__.__name__) from None
                continue
            if data and headers.get("content-type", "").startswith("application/json"):
                try:
                    return status, json.loads(data)
                except ValueError:
                    pass
            return status, data
        raise Unreachable("unreachable")  # not reached


def without_userinfo(url):
    """`url` without user and password: what is written to disk (the spool's meta)."""
    u = urllib.parse.urlsplit(url)
    if "@" not in u.netloc:
        return url
    return urllib.parse.urlunsplit(u._replace(netloc=u.netloc.rpartition("@")[2]))


def redact(url):
    """`url` without the password of its userinfo, for messages."""
    u = urllib.parse.urlsplit(url)
    if u.password is None:
        return url
    return urllib.parse.urlunsplit(u._replace(netloc="%s:xxxxx@%s" % (u.username, u.netloc.rpartition("@")[2])))


def error_text(status, doc):
    """The server's error message from an answer, for warnings."""
    if isinstance(doc, dict) and doc.get("error"):
        return "%d %s" % (status, doc["error"])
    if isinstance(doc, bytes):
        return "%d %s" % (status, doc[:300].decode("utf-8", "replace").strip())
    return str(status)
