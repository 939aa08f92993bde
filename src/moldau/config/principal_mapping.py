"""``ssl.principal.mapping.rules``: from a client certificate's subject to a principal name.

Kafka's syntax, so that a ``server.properties`` written for Kafka maps the same names here:
a comma-separated list of rules tried in order, the first that matches wins.

* ``DEFAULT`` -- the distinguished name unchanged (``CN=alice,OU=eng,O=acme``);
* ``RULE:pattern/replacement/`` -- when the regular expression matches the whole DN, the DN
  with every match replaced (``$1`` is the first group); a trailing ``L`` or ``U``
  (``RULE:.../.../L``) lower- or upper-cases the result.

The DN is the certificate subject in RFC 2253 form, as Java's ``X500Principal.getName()``
prints it (see :func:`rfc2253_name`): most specific attribute first, attributes Java has no
keyword for as ``<oid>=#<DER hex>``. A DN no rule matches fails the TLS authentication, as it
does in Kafka.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

from .definitions import ConfigError, ConfigValue, Validator

KEY = "ssl.principal.mapping.rules"

# Kafka's rule grammar: DEFAULT, RULE:<pattern>/<replacement>/[LU] (a backslash escapes a
# slash inside pattern or replacement), or an empty rule (ignored).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(Exception):
    """No rule of ``ssl.principal.mapping.rules`` applies to a distinguished name."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        """The principal name, or None when this rule does not match ``dn``."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return name.lower()
        return name.upper() if self.case == "U" else name


def _python_replacement(java: str, groups: int) -> str:
    """A Java replacement string (``$1``, ``\\$``) as one for :func:`re.sub`.

    As Kafka does, a ``$n`` naming a group the pattern lacks loses trailing digits until it
    names one (``$12`` with 3 groups is ``$1`` then ``2``), or stays a literal ``$n``.
    """
    out: list[str] = []
    pos = 0
    while pos < len(java):
        char = java[pos]
        if char == "\\":  # an escaped character is literal (re.sub reads only backslashes)
            literal = java[pos + 1:pos + 2] or "\\"
            out.append(r"\\" if literal == "\\" else literal)
            pos += 2
            continue
        match = _BACK_REFERENCE.match(java, pos) if char == "$" else None
        if match is None:
            out.append(char)
            pos += 1
            continue
        digits = match.group(1)
        if digits.startswith("0"):  # $0: the whole match
            out.append(r"\g<0>")
            pos = match.start(1) + 1
            continue
        while len(digits) > 1 and int(digits) > groups:
            digits = digits[:-1]
        out.append(rf"\g<{digits}>" if int(digits) <= groups else "$" + digits)
        pos = match.start(1) + len(digits)
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``text``; ConfigError (naming the key) when one is malformed."""
    rules: list[Rule] = []
    for split in _SPLITTER.finditer(text.strip()):
        rule = split.group(1)
        match = _PARSER.match(rule)
        if match is None or match.end() != len(rule):
            rest = rule[match.end():] if match else rule
            raise ConfigError(KEY, text, f"Invalid rule: `{rule}`, unmatched substring: "
                              f"`{rest}`")
        if match.group(1):
            rules.append(Rule())
        elif match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise ConfigError(KEY, text, f"Invalid rule: `{rule}`: {exc}") from None
            replacement = _python_replacement(match.group(3), pattern.groups)
            rules.append(Rule(pattern, replacement, match.group(4)))
        if split.end() == len(text.strip()):
            break
    return tuple(rules)


@functools.cache
def cached_rules(text: str) -> tuple[Rule, ...]:
    """:func:`parse_rules` once per distinct text (every TLS connection maps a name)."""
    return parse_rules(text)


def map_name(rules: tuple[Rule, ...], dn: str) -> str:
    """The principal name of ``dn``: the first rule that matches; NoMatchingRule if none."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"No rules apply to {dn}")


class MappingRules(Validator):
    """Validates ``ssl.principal.mapping.rules`` when the config is loaded."""

    def check(self, key: str, value: ConfigValue) -> None:
        assert isinstance(value, str)
        parse_rules(value)

    def describe(self) -> str:
        return "DEFAULT or RULE:pattern/replacement/[LU], comma-separated"


# The attribute keywords Java's RFC 2253 printer knows; any other prints as <oid>=#<hex>.
_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID",
}


def _escape(value: str) -> str:
    """RFC 2253 section 2.4 escaping of an attribute value."""
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out[:1] in ("#", " "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_hex(attribute: x509.NameAttribute[str | bytes]) -> str:
    """``#`` and the DER encoding of a value (its string type's tag, length, bytes)."""
    raw = attribute.value if isinstance(attribute.value, bytes) else \
        attribute.value.encode("utf-8")
    tag = int(attribute._type.value)
    length = len(raw)
    if length < 0x80:
        header = bytes([tag, length])
    else:
        size = length.to_bytes((length.bit_length() + 7) // 8, "big")
        header = bytes([tag, 0x80 | len(size)]) + size
    return "#" + (header + raw).hex()


def rfc2253_name(name: x509.Name) -> str:
    """``name`` as Java's ``X500Principal.getName()`` (RFC 2253) prints it."""
    parts = []
    for rdn in reversed(list(name.rdns)):
        parts.append("+".join(
            f"{_KEYWORDS[a.oid]}={_escape(str(a.value))}" if a.oid in _KEYWORDS
            else f"{a.oid.dotted_string}={_der_hex(a)}" for a in rdn))
    return ",".join(parts)


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate (a TLS peer's), RFC 2253 form."""
    return rfc2253_name(x509.load_der_x509_certificate(der).subject)
