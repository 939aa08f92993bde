"""A loopback TCP proxy whose link can be cut and healed: a network partition for one client.

Pointing one ZooKeeper client at the proxy and cutting it is how a test makes a real session
expire: the server stops hearing from the client, expires its session after the timeout and
deletes its ephemeral znodes, while the client only sees its connection fail. Cutting drops
the connections in flight and refuses new ones (accepted, then closed at once) until healed.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

from .broker_process import HOST


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target_port``; ``cut()`` / ``heal()`` the link."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self._cut = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.close()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(5)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            try:
                events = selector.select(0.1)
            except OSError:
                return
            for key, _ in events:
                if key.data is None:
                    self._accept(selector)
                else:
                    self._forward(selector, key.fileobj, key.data)  # type: ignore[arg-type]
            self._forget_closed(selector)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        if self._cut.is_set():
            client.close()
            return
        try:
            upstream = socket.create_connection((HOST, self.target_port), timeout=2)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
        # cut() closes sockets from the test's thread; a new socket may already reuse one of
        # their descriptors, which the selector still maps to the closed socket.
        self._forget_closed(selector)
        selector.register(client, selectors.EVENT_READ, upstream)
        selector.register(upstream, selectors.EVENT_READ, client)
        with self._lock:
            self._pairs.append((client, upstream))

    def _forward(self, selector: selectors.BaseSelector, source: socket.socket,
                 sink: socket.socket) -> None:
        try:
            data = source.recv(65536)
            if data:
                sink.setblocking(True)
                sink.sendall(data)
                sink.setblocking(False)
                return
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(KeyError, ValueError, OSError):
                selector.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()

    def _forget_closed(self, selector: selectors.BaseSelector) -> None:
        for key in list(selector.get_map().values()):
            sock = key.fileobj
            if key.data is not None and getattr(sock, "fileno", lambda: -1)() == -1:
                with contextlib.suppress(KeyError, ValueError, OSError):
                    selector.unregister(sock)
