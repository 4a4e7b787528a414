"""A fault-injecting HTTP proxy in front of an object store (s3rver), for bench/faults.

It forwards each HTTP/1.1 request of a client connection (keep-alive kept on the client side) to the
store over a connection of its own, and reads the whole answer before it decides what the client
gets. Under a fault mode it answers a share of the requests with a 503 SlowDown (as S3 does when it
sheds load), resets another share of the connections (SO_LINGER 0: the client sees ECONNRESET), and
truncates another share of the bodies (the full Content-Length announced, half the body sent, then
a reset), each chosen per request by a seeded random draw; it can also hold every answer for a
delay. The mode changes while clients are connected (set_mode), so a bench injects and heals a
fault under load. Requests with a body need a Content-Length (what lakecache's S3 client sends).

Plain HTTP, one thread per client connection; counts every request and every fault it injected.
"""
import random
import socket
import struct
import threading
import time

SLOW_DOWN = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
             b"<Message>Please reduce your request rate.</Message></Error>")


class FaultMode:
    """Shares of requests answered 503, reset, truncated; `delay` seconds before each answer."""

    def __init__(self, p503=0.0, preset=0.0, ptrunc=0.0, delay=0.0):
        self.p503, self.preset, self.ptrunc, self.delay = p503, preset, ptrunc, delay

    def __repr__(self):
        parts = [f"{name} {share:.0%}" for name, share in
                 (("503", self.p503), ("reset", self.preset), ("truncated", self.ptrunc)) if share]
        if self.delay:
            parts.append(f"+{self.delay:g} s per answer")
        return ", ".join(parts) or "pass-through"


def _read_head(sock, buf):
    """(head bytes, rest) of the next message on sock after buf; (None, b"") at a clean EOF."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            if buf:
                raise ConnectionError("the connection ended inside a message head")
            return None, b""
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    return buf[:end], buf[end:]


def _headers(head):
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
    return lines[0], fields


def _read_exact(sock, n, buf):
    """n bytes: buf's first, then from sock; (bytes, rest of buf)."""
    while len(buf) < n:
        data = sock.recv(min(1 << 20, n - len(buf)))
        if not data:
            raise ConnectionError("the connection ended inside a message body")
        buf += data
    return buf[:n], buf[n:]


def _dechunk(body):
    out, pos = bytearray(), 0
    while True:
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol].split(b";")[0], 16)
        pos = eol + 2
        if size == 0:
            return bytes(out)
        out += body[pos:pos + size]
        pos += size + 2


def _reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class FaultProxy:
    def __init__(self, upstream_host, upstream_port, seed=1):
        self.upstream = (upstream_host, upstream_port)
        self.mode = FaultMode()
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "503": 0, "reset": 0, "truncated": 0, "delayed": 0}
        self.server = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.server.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.stopped = False
        self.open_gate = threading.Condition(self.lock)
        self.paused = False
        self.inflight = 0  # requests being forwarded to the store
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self):
        """Holds every new request and waits until none is with the store: a change made to the
        store meanwhile (an upload, which s3rver does not make atomically) is then seen by the
        clients all at once, as a real store's atomic PUT would be."""
        with self.lock:
            self.paused = True
            while self.inflight:
                self.open_gate.wait()

    def resume(self):
        with self.lock:
            self.paused = False
            self.open_gate.notify_all()

    def set_mode(self, mode):
        with self.lock:
            self.mode = mode

    def snapshot(self):
        with self.lock:
            return dict(self.counts)

    def stop(self):
        self.stopped = True
        try:
            self.server.close()
        except OSError:
            pass

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _draw(self):
        """The fault for the next request: None, "503", "reset" or "truncated"; and the delay.
        Waits while paused; the caller ends the request with _done."""
        with self.lock:
            while self.paused:
                self.open_gate.wait()
            self.inflight += 1
            self.counts["requests"] += 1
            m, x = self.mode, self.rng.random()
            fault = None
            if x < m.p503:
                fault = "503"
            elif x < m.p503 + m.preset:
                fault = "reset"
            elif x < m.p503 + m.preset + m.ptrunc:
                fault = "truncated"
            if fault:
                self.counts[fault] += 1
            if m.delay:
                self.counts["delayed"] += 1
            return fault, m.delay

    def _done(self):
        with self.lock:
            self.inflight -= 1
            self.open_gate.notify_all()

    def _forward(self, head, body):
        """The store's answer to one request: (status line and headers as bytes, body)."""
        line, fields = _headers(head)
        kept = [ln for ln in head.decode("latin-1").split("\r\n")[1:]
                if ln and not ln.lower().startswith(("connection:", "keep-alive:"))]
        request = "\r\n".join([line, *kept, "Connection: close", "", ""]).encode("latin-1") + body
        with socket.create_connection(self.upstream, timeout=120) as up:
            up.sendall(request)
            chunks = []
            while True:
                data = up.recv(1 << 20)
                if not data:
                    break
                chunks.append(data)
        answer = b"".join(chunks)
        end = answer.index(b"\r\n\r\n") + 4
        return answer[:end], answer[end:]

    def _serve(self, client):
        buf = b""
        try:
            while not self.stopped:
                head, buf = _read_head(client, buf)
                if head is None:
                    break
                line, fields = _headers(head)
                method = line.split(" ", 1)[0]
                if "chunked" in fields.get("transfer-encoding", ""):
                    raise ConnectionError("a chunked request body (not supported by this proxy)")
                body, buf = _read_exact(client, int(fields.get("content-length", "0")), buf)
                fault, delay = self._draw()
                try:
                    self._answer(client, head, body, method, fault, delay)
                finally:
                    self._done()
        except (OSError, ConnectionError, ValueError):
            pass
        try:
            client.close()
        except OSError:
            pass

    def _answer(self, client, head, body, method, fault, delay):
        """Answers one request as the fault says; raises ConnectionError once it ended the
        connection (a reset, a cut body)."""
        if delay:
            time.sleep(delay)
        if fault == "503":
            client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                           b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(SLOW_DOWN) + SLOW_DOWN)
            return
        if fault == "reset":
            _reset(client)
            raise ConnectionError("reset")
        rhead, rbody = self._forward(head, body)
        status, rfields = _headers(rhead)
        if "chunked" in rfields.get("transfer-encoding", ""):
            rbody = _dechunk(rbody)
        kept = [ln for ln in rhead.decode("latin-1").split("\r\n")[1:]
                if ln and not ln.lower().startswith(("connection:", "keep-alive:", "transfer-encoding:",
                                                      "content-length:"))]
        length = rfields.get("content-length") if method == "HEAD" else str(len(rbody))
        if length is not None:
            kept.append(f"Content-Length: {length}")
        out = "\r\n".join([status, *kept, "Connection: keep-alive", "", ""]).encode("latin-1")
        if method == "HEAD":
            rbody = b""
        if fault == "truncated" and len(rbody) > 1:
            client.sendall(out + rbody[:len(rbody) // 2])
            _reset(client)
            raise ConnectionError("truncated")
        client.sendall(out + rbody)
