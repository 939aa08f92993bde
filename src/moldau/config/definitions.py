"""Typed config keys in the manner of Kafka's ConfigDef.

Kafka describes every config key once (name, type, default, validator, importance, doc) and
derives parsing, validation and the DescribeConfigs answers from that description. moldau does
the same so that a key behaves identically whether it arrives in ``server.properties``, as an
``--override``, in a CreateTopics request or in an IncrementalAlterConfigs request, and so that
error messages read like Kafka's (tools and users grep for them).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeAlias

#: Java's Long.MAX_VALUE / Integer.MAX_VALUE: Kafka spells "never" and "unbounded" with them,
#: and clients expect to read back exactly these numbers.
LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648
SHORT_MAX = 32767
SHORT_MIN = -32768

#: A parsed config value. Lists are tuples so that parsed configs can be shared freely.
ConfigValue: TypeAlias = bool | int | float | str | tuple[str, ...] | None


class ConfigError(ValueError):
    """A config value (or key) that Kafka would reject; the message is Kafka's wording.

    ``key``/``value``/``reason`` stay available so the broker can map the error to
    INVALID_CONFIG with the same text, and start-up can print exactly one line.
    """

    def __init__(
        self, key: str, value: object, reason: str | None = None, *, message: str | None = None
    ) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        if message is None:
            shown = "null" if value is None else value
            message = f"Invalid value {shown} for configuration {key}"
            if reason:
                message += f": {reason}"
        super().__init__(message)


class UnknownConfigError(ConfigError):
    """A key that no definition knows (topic configs reject these; broker configs only warn)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(key, None, None, message=message)


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigs ``config_type`` codes (KIP-569); also drives parsing."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs ``config_source`` codes, in Kafka's numbering.

    Kafka names code 1 TOPIC_CONFIG on the wire and DYNAMIC_TOPIC_CONFIG in the admin client;
    both names are offered so either reads naturally at the call site.
    """

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Importance(enum.Enum):
    """How much a user should care about a key; only documentation, as in Kafka."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# -- validators ------------------------------------------------------------------------------


class Validator:
    """Checks an already-parsed, non-null value; raises :class:`ConfigError` when it is bad."""

    def check(self, key: str, value: ConfigValue) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """Valid values in words, for documentation strings."""
        raise NotImplementedError


def _number_text(n: float) -> str:
    """Render a bound like Java does (integers without a fraction) for identical messages."""
    return str(int(n)) if float(n).is_integer() else str(n)


@dataclass(frozen=True, slots=True)
class Range(Validator):
    """Inclusive numeric bounds (Kafka's ``atLeast``/``between``)."""

    min: float | None = None
    max: float | None = None

    def check(self, key: str, value: ConfigValue) -> None:
        assert isinstance(value, int | float) and not isinstance(value, bool)
        if self.min is not None and value < self.min:
            raise ConfigError(key, value, f"Value must be at least {_number_text(self.min)}")
        if self.max is not None and value > self.max:
            raise ConfigError(key, value, f"Value must be no more than {_number_text(self.max)}")

    def describe(self) -> str:
        low = "..." if self.min is None else _number_text(self.min)
        high = "..." if self.max is None else _number_text(self.max)
        return f"[{low},...,{high}]" if self.max is not None else f"[{low},...]"


def at_least(n: float) -> Range:
    return Range(min=n)


def between(low: float, high: float) -> Range:
    return Range(min=low, max=high)


@dataclass(frozen=True, slots=True)
class OneOf(Validator):
    """A string from a fixed, case-sensitive set (Kafka's ``ValidString.in``)."""

    choices: tuple[str, ...]

    def check(self, key: str, value: ConfigValue) -> None:
        if value not in self.choices:
            raise ConfigError(key, value, f"String must be one of: {', '.join(self.choices)}")

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True, slots=True)
class ListOf(Validator):
    """Every element of a list from a fixed set (Kafka's ``ValidList.in``)."""

    choices: tuple[str, ...]

    def check(self, key: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple)
        for item in value:
            if item not in self.choices:
                # Kafka names the offending element, not the whole list.
                raise ConfigError(key, item, f"String must be one of: {', '.join(self.choices)}")

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


_REPLICA_PAIR = re.compile(r"\d+:\d+")


@dataclass(frozen=True, slots=True)
class ThrottledReplicas(Validator):
    """``*`` or ``partition:broker`` pairs, as Kafka's throttled-replica lists require."""

    def check(self, key: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple)
        if value == ("*",) or all(_REPLICA_PAIR.fullmatch(v) for v in value):
            return
        raise ConfigError(
            key,
            ",".join(value),
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


# -- parsing ---------------------------------------------------------------------------------

# Java's Integer/Long.parseLong accept an optional sign and ASCII digits only; Python's int()
# would also accept underscores and surrounding whitespace, which Kafka rejects.
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble also takes NaN/Infinity and a trailing d/f; Python's float() takes
# underscores and "inf"/"nan" in any case. Accept the decimal forms both agree on.
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_INT_BOUNDS = {
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def parse_typed(key: str, type_: ConfigType, raw: str) -> ConfigValue:
    """Parse one string the way Kafka's ConfigDef.parseType does (values are trimmed first)."""
    text = raw.strip()
    if type_ is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise ConfigError(key, raw, "Expected value to be either true or false")
    if type_ in _INT_BOUNDS:
        low, high = _INT_BOUNDS[type_]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ConfigError(key, raw, f"Not a number of type {type_.name}")
        return int(text)
    if type_ is ConfigType.DOUBLE:
        if text in ("NaN", "Infinity", "+Infinity", "-Infinity"):
            return float(text.replace("Infinity", "inf"))
        if not _DOUBLE.fullmatch(text):
            raise ConfigError(key, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("dDfF"))
    if type_ is ConfigType.LIST:
        return () if not text else tuple(_LIST_SPLIT.split(text))
    return text


def format_value(type_: ConfigType, value: ConfigValue) -> str | None:
    """Render a parsed value as Kafka would report it in DescribeConfigs (None stays null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """Java's Double.toString, so described doubles read exactly as a Kafka broker's do.

    Java uses plain notation for magnitudes in [1e-3, 1e7) and ``d.dddE±n`` otherwise, always
    with the shortest digits that round-trip (which Python's repr also finds).
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # plain notation with a ".0" in this range, as Java's
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


# -- key definitions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One config key: everything needed to parse, validate, default and describe it."""

    name: str
    type: ConfigType
    #: Already parsed; None is Kafka's null (no default: the key is simply unset).
    default: ConfigValue
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Validator | None = None
    #: False for keys Kafka has but moldau ignores: accepted and validated, logged at INFO.
    used: bool = True
    #: Broker keys only: may be changed at run time with IncrementalAlterConfigs.
    dynamic: bool = False
    sensitive: bool = False

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate one raw string value of this key."""
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator.check(self.name, value)
        return value

    def format(self, value: ConfigValue) -> str | None:
        return format_value(self.type, value)


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One synonym of a described config: where a value could come from, in priority order."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer, ready to be copied into the response."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    documentation: str
    synonyms: tuple[ConfigSynonym, ...] = field(default_factory=tuple)

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0 has no source, only this flag."""
        return self.source is ConfigSource.DEFAULT_CONFIG


def index_keys(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    """Build a name -> key table, refusing duplicates so a typo in a table fails at import."""
    table: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in table:
            raise RuntimeError(f"config key {key.name} defined twice")
        table[key.name] = key
    return table
