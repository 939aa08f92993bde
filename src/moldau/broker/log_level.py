"""The broker's log level from ``MOLDAU_LOG_LEVEL``, in any case.

``logging.basicConfig`` accepts only upper-case level names and raises a bare ValueError
otherwise, which a user saw as a 35-line traceback for ``MOLDAU_LOG_LEVEL=debug``. Here any
case is accepted, log4j's names a Kafka operator types out of habit (TRACE, WARN, FATAL) map
to the nearest Python level, and an unknown name is one line saying what is allowed.
"""

from __future__ import annotations

import logging

ENV_VAR = "MOLDAU_LOG_LEVEL"
DEFAULT = "INFO"

_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}


class LogLevelError(ValueError):
    """``MOLDAU_LOG_LEVEL`` names no level; the message is the one line to print."""


def parse_log_level(value: str | None) -> int:
    """The logging level named by ``value`` (None or empty: INFO)."""
    name = (value or DEFAULT).strip().upper()
    if name not in _LEVELS:
        raise LogLevelError(
            f"{ENV_VAR}={value} is not a log level; use one of "
            f"{', '.join(_LEVELS)} (any case)"
        )
    return _LEVELS[name]
