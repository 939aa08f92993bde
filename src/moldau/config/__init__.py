"""moldau's configuration: Kafka's broker and topic config keys, defaults and semantics.

Modules, smallest first: :mod:`.definitions` (typed keys, parsing, validators, errors),
:mod:`.properties` (the ``server.properties`` reader), :mod:`.topic_keys`,
:mod:`.broker_keys` and :mod:`.security_keys` (the key tables), :mod:`.broker`
(:class:`BrokerConfig`) and :mod:`.topic` (topic overrides and effective topic settings).
"""

from .broker import BrokerConfig, Listener, describe_broker_configs
from .broker import key_definition as broker_key_definition
from .broker_keys import BROKER_KEYS, DYNAMIC_KEYS, KNOWN_UNUSED_KEYS
from .definitions import (
    LONG_MAX,
    ConfigEntry,
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ConfigValue,
    UnknownConfigError,
)
from .properties import load_properties, parse_overrides, parse_properties
from .topic import (
    EffectiveTopicConfig,
    effective_topic_config,
    to_log_config,
    validate_topic_configs,
)
from .topic_keys import TOPIC_KEYS, TOPIC_SYNONYMS

__all__ = [
    "BROKER_KEYS",
    "DYNAMIC_KEYS",
    "KNOWN_UNUSED_KEYS",
    "LONG_MAX",
    "TOPIC_KEYS",
    "TOPIC_SYNONYMS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "EffectiveTopicConfig",
    "Listener",
    "UnknownConfigError",
    "broker_key_definition",
    "describe_broker_configs",
    "effective_topic_config",
    "load_properties",
    "parse_overrides",
    "parse_properties",
    "to_log_config",
    "validate_topic_configs",
]
