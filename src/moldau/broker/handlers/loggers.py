"""The BROKER_LOGGER config resource (KIP-412): log levels read and changed at run time.

Kafka exposes its log4j loggers through DescribeConfigs and IncrementalAlterConfigs so an
operator can turn on DEBUG for one component of a running broker and turn it off again, with
``kafka-configs.sh --entity-type broker-loggers``. moldau maps that onto Python's ``logging``:
names are logger names (``root`` is the root logger), levels are log4j's names. As in Kafka,
changes live in memory only; a restart returns to the configured levels.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ...config import ConfigEntry, ConfigSource, ConfigType
from ..errors import ApiError

ROOT_LOGGER = "root"
OP_SET, OP_DELETE = 0, 1
#: log4j levels Kafka accepts, and the Python level each one maps to. TRACE has no Python
#: counterpart; 5 sits below DEBUG the way TRACE sits below DEBUG in log4j.
LEVELS: dict[str, int] = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
}


def _level_name(level: int) -> str:
    """The log4j name of a Python level: the most verbose log4j level it still lets through."""
    for name, value in LEVELS.items():
        if level >= value:
            return name
    return "TRACE"


def _loggers() -> dict[str, logging.Logger]:
    """Every logger that exists now, by name, with the root logger as ``root``."""
    found = {ROOT_LOGGER: logging.getLogger()}
    for name, obj in logging.Logger.manager.loggerDict.items():
        if isinstance(obj, logging.Logger):
            found[name] = obj
    return found


def describe_loggers() -> list[ConfigEntry]:
    """One row per logger with its effective level, as Kafka's Log4jController lists them."""
    return [
        ConfigEntry(
            name=name,
            value=_level_name(logger.getEffectiveLevel()),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            read_only=False,
            is_sensitive=False,
            config_type=ConfigType.STRING,
            documentation="Log level of this logger.",
        )
        for name, logger in sorted(_loggers().items())
    ]


def alter_loggers(ops: Sequence[Any], *, validate_only: bool) -> None:
    """Apply SET/DELETE operations on log levels; check all of them before applying any."""
    loggers = _loggers()
    for op in ops:
        kind = op.config_operation
        if kind not in (OP_SET, OP_DELETE):
            raise ApiError(ErrorCode.invalid_request,
                           f"Operation {kind} is not allowed for the BROKER_LOGGER resource")
        if op.name not in loggers:
            raise ApiError(ErrorCode.invalid_config, f"Logger {op.name} does not exist!")
        if kind == OP_SET and op.value not in LEVELS:
            raise ApiError(ErrorCode.invalid_config,
                           f"Cannot set the log level of {op.name} to {op.value} as it is not a "
                           f"supported log level. Valid log levels are {', '.join(LEVELS)}")
        if kind == OP_DELETE and op.name == ROOT_LOGGER:
            raise ApiError(ErrorCode.invalid_request,
                           "Removing the log level of the root logger is not allowed")
    if validate_only:
        return
    for op in ops:
        # DELETE makes the logger inherit its parent's level again, like log4j's "unset".
        loggers[op.name].setLevel(LEVELS[op.value] if op.config_operation == OP_SET
                                  else logging.NOTSET)
