"""A real uvicorn server with the embedded app in a thread, and a TCP proxy that can cut a transfer.

``CuttingProxy`` forwards connections to the server; the first ``cuts`` connections
are closed after ``cut_after`` bytes went back to the client. It records, per
connection, the request head the client sent and the response bytes it forwarded,
so a test can count exactly which body bytes crossed the wire.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

import uvicorn

from services import free_port


class LiveServer:
    def __init__(self, app: object) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@dataclass
class Connection:
    request: bytes = b""
    forwarded: int = 0  # response bytes sent on to the client
    head_len: int | None = None  # length of the response head, once seen
    _head: bytes = b""

    @property
    def body(self) -> int:
        return self.forwarded - (self.head_len or 0)

    def request_header(self, name: str) -> str | None:
        for line in self.request.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower().encode():
                return value.strip().decode()
        return None


@dataclass
class CuttingProxy:
    upstream_port: int
    cut_after: int
    cuts: int = 1
    connections: list[Connection] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            conn = Connection()
            self.connections.append(conn)
            cut = len(self.connections) <= self.cuts
            threading.Thread(target=self._serve, args=(client, conn, cut), daemon=True).start()

    def _serve(self, client: socket.socket, conn: Connection, cut: bool) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))

        def pump_up() -> None:
            try:
                while data := client.recv(65536):
                    conn.request += data
                    upstream.sendall(data)
            except OSError:
                pass

        threading.Thread(target=pump_up, daemon=True).start()
        try:
            while data := upstream.recv(65536):
                if cut:
                    data = data[: max(0, self.cut_after - conn.forwarded)]
                if conn.head_len is None:
                    conn._head += data
                    end = conn._head.find(b"\r\n\r\n")
                    if end >= 0:
                        conn.head_len = end + 4
                client.sendall(data)
                conn.forwarded += len(data)
                if cut and conn.forwarded >= self.cut_after:
                    break
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.listener.close()
