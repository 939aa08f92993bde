"""The SCRAM server against a client computed from RFC 5802's formulas (and RFC 7677's
test vector for SCRAM-SHA-256)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from moldau.broker.scram import ScramCredential, ScramError, ScramServer


def _client_final(mechanism: str, password: str, client_first_bare: str,
                  server_first: str, channel: str = "biws") -> tuple[str, bytes]:
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c={channel},r={attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_sig = hmac.digest(hmac.digest(salted, b"Server Key", digest), auth, digest)
    return f"{without_proof},p={base64.b64encode(proof).decode()}", server_sig


def test_rfc7677_vector_credential() -> None:
    # RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    cred = ScramCredential.from_salted_password("SCRAM-SHA-256", salt, salted, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user: cred, b"k")
    bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    first = server.step(f"n,,{bare}".encode()).decode()
    final, server_sig = _client_final("SCRAM-SHA-256", "pencil", bare, first)
    assert server.step(final.encode()) == b"v=" + base64.b64encode(server_sig)
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_and_unknown_user_fail_alike(mechanism: str) -> None:
    cred = ScramCredential.from_password(mechanism, "right")
    creds = {"alice": cred}
    for user, password in (("alice", "wrong"), ("nobody", "right")):
        server = ScramServer(mechanism, creds.get, b"k")
        bare = f"n={user},r=abc"
        first = server.step(f"n,,{bare}".encode()).decode()
        assert ",s=" in first and ",i=4096" in first
        final, _ = _client_final(mechanism, password, bare, first)
        with pytest.raises(ScramError):
            server.step(final.encode())
        assert not server.complete


def test_credential_round_trips_through_kafka_text_format() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw", 8192)
    text = cred.encode()
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert ScramCredential.decode(text) == cred


@pytest.mark.parametrize("token", [b"", b"\xff\xfe", b"garbage", b"n,,r=x", b"x,,n=a,r=b"])
def test_garbage_client_first_is_refused(token: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256", lambda user: None, b"k").step(token)


def test_final_nonce_ending_with_the_server_nonce_is_accepted() -> None:
    """librdkafka 2.0.x repeats the client nonce in its final message; Kafka accepts it."""
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw")
    server = ScramServer("SCRAM-SHA-512", lambda user: cred, b"k")
    first = server.step(b"n,,n=u,r=abc").decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    final, server_sig = _client_final_raw("SCRAM-SHA-512", "pw", "n=u,r=abc", first,
                                          "abc" + attrs["r"])
    assert server.step(final.encode()) == b"v=" + base64.b64encode(server_sig)


def _client_final_raw(mechanism: str, password: str, bare: str, server_first: str,
                      nonce: str) -> tuple[str, bytes]:
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    without_proof = f"c=biws,r={nonce}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_sig = hmac.digest(hmac.digest(salted, b"Server Key", digest), auth, digest)
    return f"{without_proof},p={base64.b64encode(proof).decode()}", server_sig


def test_tampered_nonce_is_refused() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda user: cred, b"k")
    first = server.step(b"n,,n=u,r=abc").decode()
    final, _ = _client_final("SCRAM-SHA-256", "pw", "n=u,r=abc", first.replace("r=abc", "r=abd"))
    with pytest.raises(ScramError):
        server.step(final.encode())
