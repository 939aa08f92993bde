"""What all client connections share: listening sockets, the accept loop and its limits.

``Network`` owns the listening sockets and accepts connections itself (not through
``loop.create_server``) so that it can stop accepting at ``max.connections``, as Kafka's
acceptor does: new clients then wait in the listen backlog instead of being refused. It also
holds what connections share so that each one stays cheap: the scratch buffer every socket is
read into (see :mod:`moldau.protocol.frame_reader`), the request memory pool
(``queued.max.request.bytes``), the connection quotas and the idle-connection expiry
(``connections.max.idle.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
from functools import partial
from typing import TYPE_CHECKING

from ..config.listeners import Listener
from ..protocol.frame_reader import SCRATCH_BYTES
from ..protocol.memory_pool import MemoryPool
from .connection import KafkaConnection
from .connection_quotas import ConnectionQuotas
from .idle_expiry import IdleExpiry
from .session import Session

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

#: accept() failures that mean "out of descriptors or memory for now", not a broken socket.
_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Longest wait before retrying accept() after such a failure, if no connection closes first.
_RESOURCE_RETRY_S = 1.0
#: Longest a client may take over its TLS handshake (Kafka has no separate bound; its idle
#: timeout applies), so a silent client does not hold a descriptor for ever.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


def client_address(addr: object) -> str:
    """The client's IP from an accepted socket's peer address (IPv4-mapped IPv6 unwrapped)."""
    ip = str(addr[0]) if isinstance(addr, tuple) and addr else ""
    if ip.startswith("::ffff:") and "." in ip:
        ip = ip[len("::ffff:"):]
    return ip


class Network:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        #: Every socket read goes here first (one read at a time on the loop's thread).
        self.scratch = bytearray(SCRATCH_BYTES)
        self.memory = MemoryPool(config.queued_max_request_bytes)
        self.idle = IdleExpiry(config.connections_max_idle_ms)
        self.quotas = ConnectionQuotas(lambda: broker.config)
        self._sockets: list[tuple[socket.socket, Listener, ssl.SSLContext | None]] = []
        #: TLS handshakes under way (each in its own task, so a slow client never holds up
        #: the accept loop).
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting: list[asyncio.Task[None]] = []
        self._slot_freed = asyncio.Event()

    # -- listening ---------------------------------------------------------------------------

    def listen(self, listener: Listener, tls: ssl.SSLContext | None = None,
               backlog: int = 1024) -> None:
        """Bind and listen on the listener's ``host:port`` ("" for all interfaces), as
        create_server does; its connections know they came in on ``listener`` and speak TLS
        when ``tls`` is given."""
        infos = socket.getaddrinfo(listener.host or None, listener.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        seen: set[tuple[int, object]] = set()
        for family, type_, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, type_, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(backlog)
                sock.setblocking(False)
            except OSError:
                sock.close()
                self.close_sockets()
                raise
            self._sockets.append((sock, listener, tls))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._accepting = [loop.create_task(self._accept_loop(s, listener, tls))
                           for s, listener, tls in self._sockets]

    def close_sockets(self) -> None:
        for sock, _listener, _tls in self._sockets:
            sock.close()
        self._sockets.clear()

    async def close(self) -> None:
        """Stop accepting, then close every connection and wait for their workers."""
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        self._accepting.clear()
        for task in list(self._handshakes):
            task.cancel()
        await asyncio.gather(*self._handshakes, return_exceptions=True)
        self.close_sockets()
        self.idle.stop()
        conns = list(self.broker.connections)
        await asyncio.gather(*(c.close("broker shutting down") for c in conns))

    async def _accept_loop(self, listening: socket.socket, listener: Listener,
                           tls: ssl.SSLContext | None) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self.quotas.at_max():
                await self._wait_for_slot()
            try:
                sock, addr = await loop.sock_accept(listening)
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRORS:
                    log.warning("cannot accept connections: %s; retrying when a connection "
                                "closes", exc)
                    self._slot_freed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._slot_freed.wait(), _RESOURCE_RETRY_S)
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue  # the client gave up before we accepted
                raise
            ip = client_address(addr)
            if not self.quotas.admit(ip):
                sock.close()
                continue
            if tls is not None:
                task = loop.create_task(self._connect(sock, ip, listener, tls))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
            else:
                await self._connect(sock, ip, listener, None)

    async def _connect(self, sock: socket.socket, ip: str, listener: Listener,
                       tls: ssl.SSLContext | None) -> None:
        """Hand an accepted socket to a new connection (after its TLS handshake, if any)."""
        loop = asyncio.get_running_loop()
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.connect_accepted_socket(
                partial(KafkaConnection, self, ip, Session(listener, ip)), sock, ssl=tls,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls is not None else None)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            # A failed handshake (plaintext on a TLS port, an untrusted or missing client
            # certificate, a truncated record) costs this connection only.
            what = "TLS handshake failed" if tls is not None else "dropping connection"
            log.info("%s with /%s (listener %s): %s", what, ip, listener.name,
                     exc or type(exc).__name__)
            self.quotas.release(ip)
            sock.close()
            self._slot_freed.set()

    async def _wait_for_slot(self) -> None:
        limit = self.quotas.max_connections
        log.info("max.connections (%d) reached: not accepting new connections until one "
                 "closes", limit)
        while self.quotas.at_max():
            self._slot_freed.clear()
            await self._slot_freed.wait()
        log.info("accepting connections again (%d open)", self.quotas.total)

    # -- connections report here -------------------------------------------------------------

    def connection_opened(self, conn: KafkaConnection) -> None:
        self.broker.connections.add(conn)
        self.idle.touch(conn)
        metrics = self.broker.metrics
        if metrics is not None:
            name = conn.session.listener.name
            metrics.connections_created[name] = metrics.connections_created.get(name, 0) + 1

    def connection_closed(self, conn: KafkaConnection) -> None:
        metrics = self.broker.metrics
        if metrics is not None and conn in self.broker.connections:
            name = conn.session.listener.name
            metrics.connections_closed[name] = metrics.connections_closed.get(name, 0) + 1
        self.broker.connections.discard(conn)
        self.idle.forget(conn)
        self.memory.cancel_wait(conn)
        self.quotas.release(conn.client_ip)
        self._slot_freed.set()
