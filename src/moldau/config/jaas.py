"""The one part of a JAAS login context a broker reads: the options of its login module.

Kafka's PLAIN server checks passwords against ``user_<name>="<password>"`` options of the
``PlainLoginModule`` entry in ``listener.name.<l>.plain.sasl.jaas.config`` (or
``sasl.jaas.config``), e.g.::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a-pw";

The same text works unchanged here.
"""

from __future__ import annotations

import re

from .definitions import ConfigError

_ENTRY = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\s*"
                    r"((?:[^;\"']|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')*);\s*")
_OPTION = re.compile(r"\s*([\w.\-]+)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s\"']+)")


def parse_jaas_options(key: str, text: str) -> dict[str, str]:
    """The options of the (single) login module in ``text``; ConfigError if malformed."""
    match = _ENTRY.fullmatch(text)
    if match is None:
        raise ConfigError(key, "[hidden]", "Value not specified as a login module entry "
                          "ending with ';' (LoginModule flag key=\"value\" ...;)")
    options: dict[str, str] = {}
    rest = match.group(3)
    pos = 0
    while rest[pos:].strip():
        option = _OPTION.match(rest, pos)
        if option is None:
            raise ConfigError(key, "[hidden]", "Invalid JAAS option near "
                              f"{rest[pos:pos + 20].strip()!r}")
        value = option.group(2)
        if value[:1] in "\"'":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[option.group(1)] = value
        pos = option.end()
    return options


def plain_users(options: dict[str, str]) -> dict[str, str]:
    """The ``user_<name>="password"`` entries of a PlainLoginModule."""
    return {name[len("user_"):]: value for name, value in options.items()
            if name.startswith("user_")}
