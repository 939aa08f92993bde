"""SCRAM credentials as Kafka stores them under ``/config/users/<user>`` (ScramCredentialUtils).

Only salted credentials are kept (salt, iterations, stored key, server key); the broker's
SCRAM server checks proofs against them (:mod:`moldau.broker.scram`), and a credential can be
made from a password here without a broker (``moldau user add --zookeeper``: the inter-broker
user of a cluster whose only listeners are SASL ones must exist before the brokers start).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

#: Kafka's ScramMechanism: name -> (hash name, AlterUserScramCredentials type id).
MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}
MECHANISM_BY_TYPE: dict[int, str] = {type_: name for name, (_, type_) in MECHANISMS.items()}
#: Kafka's bounds on iterations (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        """What AlterUserScramCredentials stores from the client's SaltedPassword."""
        digest = MECHANISMS[mechanism][0]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        return cls(salt, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", digest), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str,
                      iterations: int = MIN_ITERATIONS) -> ScramCredential:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt,
                                     iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def encode(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString (the /config/users format)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def store_in_zookeeper(connect: str, user: str, password: str, mechanisms: tuple[str, ...],
                       iterations: int = MIN_ITERATIONS, timeout_ms: int = 15_000) -> None:
    """Salt and store ``user``'s credentials straight in ZooKeeper (``/config/users/<user>``,
    with a change notification), as ``kafka-configs --zookeeper --alter --add-config
    'SCRAM-SHA-512=[password=...]'`` does: the way to create users before any broker runs.
    Raises the ZooKeeper client's errors (kazoo's) when ZooKeeper cannot be reached."""
    from .zookeeper import ZkMetadataStore  # kazoo: only when ZooKeeper is used

    store = ZkMetadataStore(connect, -1, session_timeout_ms=timeout_ms,
                            connection_timeout_ms=timeout_ms).start()
    try:
        configs = store.user_configs(user)
        for mechanism in mechanisms:
            configs[mechanism] = ScramCredential.from_password(mechanism, password,
                                                               iterations).encode()
        store.set_user_configs(user, configs)
    finally:
        store.close()
