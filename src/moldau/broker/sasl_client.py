"""The client side of a SASL exchange, sans I/O: the tokens to send, each made from the
server's answer to the previous one.

Brokers authenticating to their peers (:mod:`.peer_connection`) and the CLI's raw requests
(:mod:`moldau.cli.raw_requests`) both send these tokens in SaslAuthenticate requests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .oauthbearer import unsecured_login_token
from .scram import ScramClient


class SaslToken:
    """One client token of an exchange (``send``) and the server's answer to it
    (``received``, set by the caller before asking for the next token)."""

    def __init__(self, send: bytes) -> None:
        self.send = send
        self.received = b""


class SaslClientExchange:
    """The tokens of one exchange for ``mechanism``. ``options`` are JAAS-style login
    options: ``username`` and ``password`` for PLAIN and SCRAM, the unsecured login options
    (``unsecuredLoginStringClaim_sub``, ...) for OAUTHBEARER. A wrong SCRAM answer from the
    server raises :class:`.scram.ScramError` while iterating."""

    def __init__(self, mechanism: str, options: Mapping[str, str]) -> None:
        self._mechanism = mechanism
        self._options = options

    def __iter__(self) -> Iterator[SaslToken]:
        option = self._options.get
        if self._mechanism == "PLAIN":
            yield SaslToken(b"\0" + option("username", "").encode() + b"\0" +
                            option("password", "").encode())
        elif self._mechanism == "OAUTHBEARER":
            token = unsecured_login_token(dict(self._options))
            login = SaslToken(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            yield login
            if login.received:  # RFC 7628's error JSON: acknowledge, the failure follows
                yield SaslToken(b"\x01")
        else:
            client = ScramClient(self._mechanism, option("username", ""),
                                 option("password", ""))
            first = SaslToken(client.first())
            yield first
            final = SaslToken(client.final(first.received))
            yield final
            client.verify(final.received)
