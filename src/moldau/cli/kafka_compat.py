"""Kafka tool habits: the flags of ``kafka-console-*`` and ``kafka-topics`` that moldau takes.

People arrive with ``--topic demo --property print.key=true`` in their fingers. Where the
meaning is the same, moldau accepts the Kafka spelling; where moldau has its own form, a
mistaken Kafka flag is answered with that form in one line instead of a bare "no such
option".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from .assignments import parse_assignment
from .errors import CliError

F = TypeVar("F", bound=Callable[..., Any])

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}

# Kafka tool flags moldau does not take, and what to type instead.
KAFKA_FLAG_HINTS: dict[str, str] = {
    "--create": "moldau uses subcommands: moldau topic create NAME",
    "--list": "moldau uses subcommands: moldau topic list, moldau group list",
    "--describe": "moldau uses subcommands: moldau topic describe [NAME], "
                  "moldau group describe GROUP, moldau config describe",
    "--alter": "moldau uses subcommands: moldau topic alter NAME, moldau config alter",
    "--delete": "moldau uses subcommands: moldau topic delete NAME, moldau group delete GROUP",
    "--reset-offsets": "moldau uses a subcommand: moldau group reset-offsets GROUP --topic T ...",
    "--zookeeper": "moldau has no ZooKeeper: use --bootstrap-server HOST:PORT",
    "--broker-list": "use --bootstrap-server HOST:PORT (or -b)",
    "--consumer-property": "moldau consume has no client properties: see moldau consume --help",
    "--producer-property": "moldau produce takes --acks, --compression, --linger-ms, "
                           "--delivery-timeout-ms: see moldau produce --help",
    "--command-config": "moldau takes no client config file: use -b/--bootstrap-server and "
                        "--timeout",
    "--version": "moldau --version (before any command) or moldau version",
    "--formatter": "moldau consume prints text (with --print-* flags) or --format json",
    "--election-type": "moldau cluster elect-leaders takes --type preferred|unclean",
    "--all-topic-partitions": "moldau cluster elect-leaders without --topic elects for every "
                              "partition",
    "--path-to-json-file": "moldau cluster elect-leaders takes --topic T [--partition N]",
}


def hint_for(option: str | None) -> str | None:
    """The moldau form for a Kafka flag moldau does not accept, if it is one."""
    if option is None:
        return None
    return KAFKA_FLAG_HINTS.get(option.split("=", 1)[0])


def parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise CliError(f"invalid --property {key}={value!r}: expected true or false")


@dataclass
class ConsoleProperties:
    """What ``--property`` set for kafka-console-consumer / -producer, as moldau options."""

    print_key: bool | None = None
    print_timestamp: bool | None = None
    print_partition: bool | None = None
    print_offset: bool | None = None
    print_headers: bool | None = None
    print_value: bool | None = None
    key_separator: str | None = None
    parse_key: bool | None = None


_CONSUMER_KEYS = {
    "print.key": "print_key",
    "print.timestamp": "print_timestamp",
    "print.partition": "print_partition",
    "print.offset": "print_offset",
    "print.headers": "print_headers",
    "print.value": "print_value",
}
_PRODUCER_KEYS = {"parse.key": "parse_key"}


def parse_properties(texts: Iterable[str], *, consumer: bool) -> ConsoleProperties:
    """Parse ``--property KEY=VALUE`` the way Kafka's console tools read them.

    Unknown keys are refused with the list of those understood, rather than ignored: a
    property that silently does nothing is the worst kind of flag.
    """
    flags = _CONSUMER_KEYS if consumer else _PRODUCER_KEYS
    result = ConsoleProperties()
    for text in texts:
        key, value = parse_assignment(text, "--property")
        if key == "key.separator":
            if value == "":
                raise CliError("--property key.separator must not be empty")
            result.key_separator = value
        elif key in flags:
            setattr(result, flags[key], parse_bool(key, value))
        else:
            known = ", ".join([*flags, "key.separator"])
            tool = "consume" if consumer else "produce"
            raise CliError(
                f"unsupported --property {key!r} for moldau {tool}; supported: {known} "
                f"(or see moldau {tool} --help)"
            )
    return result


def resolve_topic(argument: str | None, option: str | None, *, required: bool = True) -> str | None:
    """TOPIC as an argument (moldau) or as ``--topic`` (Kafka's tools); the same either way."""
    if argument is not None and option is not None and argument != option:
        raise CliError(f"two topics given: {argument!r} and --topic {option!r}; give one")
    topic = argument if argument is not None else option
    if topic is None and required:
        raise CliError("give a topic: TOPIC or --topic TOPIC")
    return topic


def topic_argument(*, required: bool = True) -> Callable[[F], F]:
    """Add a TOPIC argument and its Kafka spelling ``--topic``; pass one ``topic`` on."""

    def decorate(command: F) -> F:
        @click.argument("topic_argument", metavar="TOPIC", required=False)
        @click.option("--topic", "topic_option", metavar="TOPIC",
                      help="The topic, as Kafka's tools spell it (same as the TOPIC argument).")
        @functools.wraps(command)
        def wrapper(*args: Any, topic_argument: str | None, topic_option: str | None,
                    **kwargs: Any) -> Any:
            topic = resolve_topic(topic_argument, topic_option, required=required)
            return command(*args, topic=topic, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
