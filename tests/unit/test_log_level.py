"""MOLDAU_LOG_LEVEL in any case; an unknown name is one line saying what is allowed."""

from __future__ import annotations

import logging

import pytest

from moldau.broker.log_level import LogLevelError, parse_log_level


@pytest.mark.parametrize(("value", "level"), [
    (None, logging.INFO), ("", logging.INFO), ("debug", logging.DEBUG),
    ("Warning", logging.WARNING), ("WARN", logging.WARNING), (" error ", logging.ERROR),
    ("trace", logging.DEBUG), ("fatal", logging.CRITICAL),
])
def test_names_in_any_case(value: str | None, level: int) -> None:
    assert parse_log_level(value) == level


def test_unknown_name_is_one_line() -> None:
    with pytest.raises(LogLevelError) as info:
        parse_log_level("verbose")
    message = str(info.value)
    assert message.startswith("MOLDAU_LOG_LEVEL=verbose is not a log level")
    assert "\n" not in message
