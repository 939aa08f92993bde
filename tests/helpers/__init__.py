"""Test support: broker subprocesses, free ports, unique names, running the CLI."""

from .broker_process import BrokerProcess, BrokerStartError, ExternalBroker, free_port, terminate
from .cli import Result, moldau_executable, ok, one_line_error, run_moldau
from .names import unique_topic_name

__all__ = [
    "BrokerProcess",
    "BrokerStartError",
    "ExternalBroker",
    "Result",
    "free_port",
    "moldau_executable",
    "ok",
    "one_line_error",
    "run_moldau",
    "terminate",
    "unique_topic_name",
]
