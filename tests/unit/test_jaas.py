from __future__ import annotations

import pytest

from moldau.config.definitions import ConfigError
from moldau.config.jaas import parse_jaas_options, plain_users


def test_plain_login_module_users() -> None:
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="admin-secret"\n'
            '  user_admin="admin-secret" user_alice="a \\"quoted\\" pw";')
    options = parse_jaas_options("sasl.jaas.config", text)
    assert options["username"] == "admin"
    assert plain_users(options) == {"admin": "admin-secret", "alice": 'a "quoted" pw'}


@pytest.mark.parametrize("text", ["", "no flag;", 'M required user_a="x"',
                                  'M required user_a="x" "loose";'])
def test_malformed_jaas_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_jaas_options("sasl.jaas.config", text)
