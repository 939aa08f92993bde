"""Test support: broker subprocesses, free ports, unique names, running the CLI."""

from .broker_process import BrokerProcess, BrokerStartError, ExternalBroker, free_port
from .cli import moldau_executable, run_moldau
from .names import unique_topic_name

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "ExternalBroker",
    "free_port",
    "moldau_executable",
    "run_moldau",
    "unique_topic_name",
]
