"""Turning client failures into one line on stderr.

A person running the CLI wants to know what went wrong and what to do, not where in our
code it happened. Every expected failure (bad input, missing topic, unreachable broker,
a broker that refuses a request) becomes a :class:`CliError`, which click prints as
``Error: ...`` and exits with status 1. Only genuine bugs still show a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from confluent_kafka import KafkaError, KafkaException


class CliError(click.ClickException):
    """A user-facing failure: printed as ``Error: <message>``, exit status 1."""


# librdkafka's local error codes that mean "we never got an answer from a broker".
_NO_ANSWER = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._WAIT_COORD,
}


def describe_kafka_error(error: KafkaError) -> str:
    """Render a KafkaError as ``message (CODE_NAME)``.

    ``str()`` carries the broker's own error message when it sent one (for example the
    reason behind INVALID_CONFIG), which is what the user needs; the code name makes the
    line searchable in Kafka's documentation.
    """
    text = error.str() or "unknown error"
    name = error.name()
    if error.code() in _NO_ANSWER:
        return f"no answer from the broker: {text}"
    return f"{text} ({name})" if name and name not in text else text


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The KafkaError carried by a KafkaException, if there is one."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def as_cli_error(exc: BaseException, context: str) -> CliError:
    """Wrap a client exception with what we were trying to do when it happened."""
    error = kafka_error_of(exc)
    detail = describe_kafka_error(error) if error is not None else str(exc) or type(exc).__name__
    return CliError(f"{context}: {detail}")


def _with_kafka_hint(exc: click.NoSuchOption) -> click.UsageError:
    """A Kafka tool's flag that moldau spells differently: say how, in the same line."""
    from .kafka_compat import hint_for

    hint = hint_for(exc.option_name)
    if hint is None:
        return exc
    return click.UsageError(f"no such option {exc.option_name}: {hint}", ctx=exc.ctx)


class ErrorReportingGroup(click.Group):
    """Root command group that converts stray client exceptions into :class:`CliError`.

    Commands translate the errors they expect with better context; this is the safety net
    so that a KafkaException we did not foresee still ends as one line, not a traceback.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            raise _with_kafka_hint(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            raise _with_kafka_hint(exc) from None
        except KafkaException as exc:
            raise as_cli_error(exc, "request failed") from exc
        except BrokenPipeError:
            # `moldau consume ... | head` closed our stdout: that is a normal way to stop.
            # Point stdout at /dev/null so the interpreter's final flush does not complain.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(0) from None
