"""ssl.principal.mapping.rules: Kafka's rule syntax and the RFC 2253 subject it applies to."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from moldau.config import BrokerConfig, ConfigError
from moldau.config.principal_mapping import (
    NoMatchingRule,
    certificate_dn,
    map_name,
    parse_rules,
    rfc2253_name,
)

SERVICE = "CN=billing,OU=Services,O=Example Corp,L=Berlin,ST=Berlin,C=DE"
PERSON = "CN=Bob.Smith,OU=Ops,O=Example Corp,L=Berlin,ST=Berlin,C=DE"

RULES = (r"RULE:^CN=(.*?),OU=Services.*$/svc-$1/,"
         r"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
         r"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
         "DEFAULT")


@pytest.mark.parametrize(("dn", "expected"), [
    (SERVICE, "svc-billing"),
    (PERSON, "bob.smith@ops"),
    ("O=Example Corp,CN=Carol,C=DE", "CAROL"),
    ("O=No Common Name,C=DE", "O=No Common Name,C=DE"),
])
def test_first_matching_rule_wins(dn: str, expected: str) -> None:
    assert map_name(parse_rules(RULES), dn) == expected


def test_default_alone_keeps_the_whole_dn() -> None:
    assert map_name(parse_rules("DEFAULT"), SERVICE) == SERVICE


def test_no_matching_rule_fails() -> None:
    with pytest.raises(NoMatchingRule, match="No rules apply to O=x"):
        map_name(parse_rules(r"RULE:^CN=(.*)$/$1/"), "O=x")


def test_pattern_must_match_the_whole_dn() -> None:
    # "CN=alice" is found inside the DN, but the rule's pattern must match all of it.
    with pytest.raises(NoMatchingRule):
        map_name(parse_rules("RULE:CN=alice/alice/"), "CN=alice,O=x")


def test_escaped_slash_and_upper_case() -> None:
    rules = parse_rules(r"RULE:^CN=([^,]*),O=(.*)$/$2\/$1/U")
    assert map_name(rules, "CN=alice,O=acme") == "ACME/ALICE"


def test_back_reference_beyond_the_groups_is_literal_or_shortened() -> None:
    # As in Kafka: $12 with one group is group 1 then "2"; $5 with one group stays "$5".
    assert map_name(parse_rules(r"RULE:^CN=(.*)$/$12/"), "CN=a") == "a2"
    assert map_name(parse_rules(r"RULE:^CN=(.*)$/$5-$1/"), "CN=a") == "$5-a"


@pytest.mark.parametrize("rules", [
    "RULE:^CN=(.*)$/$1",          # no closing slash
    "RULE:^CN=(.*)$/$1/X",        # only L or U after the replacement
    "DEFAULTS",
    "RULE:^CN=((.*)$/$1/",        # a pattern that does not compile
])
def test_malformed_rules_are_refused_at_load(rules: str) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        BrokerConfig({"ssl.principal.mapping.rules": rules})


def test_valid_rules_load() -> None:
    config = BrokerConfig({"ssl.principal.mapping.rules": RULES})
    assert config.listener_setting("PLAINTEXT", "ssl.principal.mapping.rules") == RULES


def _certificate(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(Encoding.DER)


def test_certificate_subject_in_rfc2253_form() -> None:
    subject = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example, Corp"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
    ])
    assert certificate_dn(_certificate(subject)) == r"CN=alice,OU=eng,O=Example\, Corp,C=DE"


def test_attributes_without_a_java_keyword_print_as_der_hex() -> None:
    # Java's RFC 2253 printer knows no keyword for emailAddress: OID=#<DER>, IA5String tag 22.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                      x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@x.io")])
    assert rfc2253_name(name) == "1.2.840.113549.1.9.1=#1606614078" + b".io".hex() + \
        ",CN=alice"


def test_multi_valued_rdn_joins_with_plus() -> None:
    name = x509.Name([x509.RelativeDistinguishedName([
        x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
        x509.NameAttribute(NameOID.USER_ID, "a1")])])
    assert rfc2253_name(name) in ("CN=alice+UID=a1", "UID=a1+CN=alice")
