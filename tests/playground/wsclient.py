"""A minimal blocking WebSocket client (RFC 6455, text frames) for tests against live servers:
no dependency beyond the standard library, so the fault tests see exactly what a browser sees,
close codes included."""
from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time


class Closed(Exception):
    def __init__(self, code: int | None, reason: str = ""):
        super().__init__(f"closed with {code} {reason}".strip())
        self.code, self.reason = code, reason


class WSClient:
    def __init__(self, port: int, path: str = "/ws/generate/", origin: str | None = None, timeout: float = 10,
                 source: str | None = None):
        """`source`: a loopback address to connect from (127.0.0.2, ...): another client IP for the limits."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        key = base64.b64encode(os.urandom(16)).decode()
        origin = origin or f"http://127.0.0.1:{port}"
        request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n")
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Closed(None, "handshake refused")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        if self.status != 101:
            raise Closed(None, f"HTTP {self.status}")

    def send_text(self, text: str | bytes, opcode: int = 1) -> None:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 2**16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data)) if n < 65536 else _mask(data, mask)
        self.sock.sendall(header + mask + masked)

    def send(self, message: dict) -> None:
        self.send_text(json.dumps(message))

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed(None, "connection dropped")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, timeout: float = 10) -> dict:
        """The next text message as JSON; Closed on a close frame or a dropped connection."""
        self.sock.settimeout(timeout)
        parts = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode(errors="replace"))
            if opcode == 9:  # ping -> pong
                self.send_text(payload, opcode=10)
                continue
            if opcode in (0, 1):
                parts += payload
                if b0 & 0x80:
                    return json.loads(parts)

    def until(self, predicate, timeout: float = 30) -> list[dict]:
        """Messages up to and including the first that satisfies predicate."""
        deadline, out = time.monotonic() + timeout, []
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no matching message within {timeout} s; got {out[-3:]}")
            msg = self.recv(max(0.01, deadline - time.monotonic()))
            out.append(msg)
            if predicate(msg):
                return out

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _mask(data: bytes, mask: bytes) -> bytes:
    import numpy as np

    arr = np.frombuffer(data, dtype=np.uint8)
    m = np.frombuffer((mask * (len(data) // 4 + 1))[: len(data)], dtype=np.uint8)
    return (arr ^ m).tobytes()


def ended(msg: dict) -> bool:
    """A run's last message: done, or an error that names the run."""
    return msg["type"] == "done" or (msg["type"] == "error" and "run_id" in msg)
