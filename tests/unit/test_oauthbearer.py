"""OAUTHBEARER with unsecured JWS tokens: the checks of Kafka's unsecured validator and the
RFC 7628 exchange (error JSON challenge, then failure on the client's 0x01)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from moldau.broker.oauthbearer import (
    InvalidToken,
    MalformedMessage,
    ValidatorOptions,
    parse_client_first,
    unsecured_login_token,
    validate,
)
from moldau.broker.sasl import OAuthBearerExchange, SaslFailure
from tests.helpers.unsecured_jwt import client_first_message, encode_part, unsecured_token

DEFAULTS = ValidatorOptions()


def test_a_good_token_gives_its_subject_and_expiry() -> None:
    token = validate(unsecured_token("alice", lifetime_s=60, scope=["read", "write"]), DEFAULTS)
    assert token.principal == "alice"
    assert abs(token.expires_ms - (time.time() + 60) * 1000) < 2000
    assert token.scope == {"read", "write"}


# Tokens are made when the test runs, not when it is collected: a time-bound one (an "iat" in
# the future) made at collection may already be valid when a long run reaches the test.
@pytest.mark.parametrize(("make_token", "reason"), [
    (lambda: "not-a-jwt", "3 dot-separated"),
    (lambda: "a..b", "contains '..'"),
    (lambda: f"{encode_part(b'not json')}.{encode_part({'sub': 'a'})}.", "malformed"),
    (lambda: f"{encode_part(['a list'])}.{encode_part({'sub': 'a'})}.", "malformed JSON"),
    (lambda: unsecured_token(header={"alg": "HS256"}), "'none' for an algorithm"),
    (lambda: unsecured_token(header={"typ": "JWT"}), "'none' for an algorithm"),
    (lambda: unsecured_token(signature="c2ln"), "must not contain a digital signature"),
    (lambda: unsecured_token(exp=None), "No expiration time"),
    (lambda: unsecured_token(exp="tomorrow"), "'exp' claim was not of type Number"),
    (lambda: unsecured_token(sub=None), "Required claim missing: sub"),
    (lambda: unsecured_token(sub="  "), "No principal name"),
    (lambda: unsecured_token(lifetime_s=-10), "on or after the Expiration Time"),
    (lambda: unsecured_token(iat=time.time() + 600), "Issued At value"),
])
def test_bad_tokens_are_invalid(make_token: Callable[[], str], reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason) as caught:
        validate(make_token(), DEFAULTS)
    assert caught.value.challenge() == '{"status":"invalid_token"}'


def test_clock_skew_allows_a_just_expired_token() -> None:
    token = unsecured_token(lifetime_s=-2, iat=int(time.time()) - 60)
    with pytest.raises(InvalidToken):
        validate(token, DEFAULTS)
    assert validate(token, ValidatorOptions(clock_skew_ms=10_000)).principal == "alice"


def test_required_scope_and_its_error_json() -> None:
    options = ValidatorOptions.from_jaas({"unsecuredValidatorRequiredScope": "kafka admin"})
    assert validate(unsecured_token(scope=["admin", "kafka", "x"]), options)
    with pytest.raises(InvalidToken, match="missing a required scope") as caught:
        validate(unsecured_token(scope="kafka"), options)
    assert caught.value.challenge() == \
        '{"status":"insufficient_scope", "scope":"[kafka, admin]"}'


def test_custom_principal_and_scope_claims() -> None:
    options = ValidatorOptions.from_jaas({"unsecuredValidatorPrincipalClaimName": "user",
                                          "unsecuredValidatorScopeClaimName": "roles",
                                          "unsecuredValidatorRequiredScope": "ops"})
    assert validate(unsecured_token(None, user="carol", roles=["ops"]), options).principal == \
        "carol"


def test_negative_clock_skew_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        ValidatorOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_client_first_message() -> None:
    assert parse_client_first(client_first_message("a.b.", "alice")) == ("alice", "a.b.")
    assert parse_client_first(b"n,,\x01host=x\x01auth=bearer a.b.\x01\x01") == ("", "a.b.")
    for bad in (b"garbage", b"n,,\x01host=x\x01\x01", b"n,,\x01auth=Basic a.b.\x01\x01",
                b"n,,\x01auth=Bearer a b\x01\x01"):
        with pytest.raises(MalformedMessage):
            parse_client_first(bad)


def test_exchange_success_and_authzid_mismatch() -> None:
    exchange = OAuthBearerExchange(DEFAULTS)
    assert exchange.step(client_first_message(unsecured_token("alice"), "alice")) == b""
    assert exchange.complete and exchange.username == "alice"
    assert exchange.credential_expires_ms is not None
    other = OAuthBearerExchange(DEFAULTS)
    with pytest.raises(SaslFailure, match="different from the token's principal") as caught:
        other.step(client_first_message(unsecured_token("alice"), "bob"))
    assert caught.value.client_message is not None


def test_exchange_sends_the_error_json_then_fails() -> None:
    exchange = OAuthBearerExchange(DEFAULTS)
    challenge = exchange.step(client_first_message(unsecured_token(lifetime_s=-5)))
    assert challenge == b'{"status":"invalid_token"}' and not exchange.complete
    with pytest.raises(SaslFailure, match=r"invalid token: .*Expiration") as caught:
        exchange.step(b"\x01")
    assert caught.value.client_message == '{"status":"invalid_token"}'


def test_malformed_message_fails_with_the_generic_answer() -> None:
    with pytest.raises(SaslFailure) as caught:
        OAuthBearerExchange(DEFAULTS).step(b"\xff\xfe garbage")
    assert caught.value.client_message is None


def test_unsecured_login_token_from_jaas_options() -> None:
    token = unsecured_login_token({"unsecuredLoginStringClaim_sub": "broker",
                                   "unsecuredLoginListClaim_scope": ",kafka,,admin",
                                   "unsecuredLoginNumberClaim_level": "3",
                                   "unsecuredLoginLifetimeSeconds": "120"})
    validated = validate(token, ValidatorOptions(required_scope=("kafka", "admin")))
    assert validated.principal == "broker" and validated.scope == {"kafka", "admin"}
    assert abs(validated.expires_ms - (time.time() + 120) * 1000) < 2000
