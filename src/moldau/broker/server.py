"""The broker process: event loop, listening socket, signals, clean shutdown.

``run_broker`` is what ``moldau broker`` and ``make run`` call. It raises its open-file limit
to the hard limit (each connection and each open segment file is a descriptor, and Kafka users
expect a broker to take tens of thousands of connections), opens the metrics endpoint when
configured, opens the logs (recovering them after an unclean stop), listens on every
configured listener, prints one line saying where it listens and where its data is, and on
SIGINT/SIGTERM stops accepting, closes client connections and closes the logs cleanly so that
the next start skips recovery. In a cluster it first hands its leadership over
(``controlled_shutdown``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys

from ..config import BrokerConfig, ConfigError, Listener
from ..config.tls import server_context
from ..log.errors import LogDirOfflineError
from ..metrics.endpoint import MetricsEndpoint
from .broker import Broker
from .console_child import ConsoleChild
from .controlled_shutdown import controlled_shutdown
from .handlers import register_all
from .log_level import ENV_VAR, parse_log_level
from .loop_watchdog import LoopWatchdog
from .network import Network

log = logging.getLogger(__name__)


class ListenerError(OSError):
    """The listener's address cannot be bound (in use, not local, unresolvable)."""


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (``MOLDAU_EVENT_LOOP=asyncio`` forces the standard loop)."""
    if os.environ.get("MOLDAU_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:
            pass
    return asyncio.new_event_loop()


async def serve(config: BrokerConfig, stop: asyncio.Event) -> None:
    """Run a broker until ``stop`` is set."""
    loop = asyncio.get_running_loop()
    console_listener = _console_listener(config)
    # Before the logs open: a bad key store stops start-up with a message naming the key.
    tls = {lst.name: server_context(config, lst.name) for lst in config.listeners
           if lst.security_protocol in ("SSL", "SASL_SSL")}
    # Then the metrics endpoint, so that /health answers while the logs load (live, not
    # ready); then the broker, built on a worker thread: its constructor (logs, recovery,
    # coordinators, registration) touches no event loop, and the loop meanwhile serves only
    # that endpoint, so start-up takes as long as before.
    metrics = await _start_metrics(config)
    try:
        broker = await asyncio.to_thread(Broker, config)
    except BaseException:
        if metrics is not None:
            await metrics.stop()
        raise
    broker.request_shutdown = stop.set
    register_all(broker)
    listener = config.listeners[0]
    network = Network(broker)
    for each in config.listeners:
        try:
            network.listen(each, tls.get(each.name))
        except OSError as exc:
            network.close_sockets()
            if metrics is not None:
                await metrics.stop()
            broker.close()  # the logs were opened: close them cleanly, skipping recovery
            raise ListenerError(f"cannot listen on {each.name}://{each.host}:"
                                f"{each.port}: {_reason(exc)}") from exc
    network.start()
    if metrics is not None:
        # In the same loop step as listen and start: no client is served before the counters
        # exist, and /health/ready says ready only once the Kafka port accepts.
        metrics.attach(broker)
    broker.start_background()
    console = await _start_console(console_listener, metrics)
    watchdog = LoopWatchdog(loop, config.loop_stall_warn_ms / 1000, broker.running)
    watchdog.start()
    data = ", ".join(str(d.resolve()) for d in config.log_dirs)
    shown = f", metrics at {metrics.url}/metrics" if metrics is not None else ""
    more = "".join(f" and {each}" for each in config.listeners[1:])
    print(f"moldau broker {broker.node_id} listening on {listener.host}:{listener.port}{more}, "
          f"data in {data}{shown}", flush=True)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await _controlled_shutdown(broker)
        await network.close()
        if console is not None:
            await console.stop()
        if metrics is not None:
            await metrics.stop()
        await watchdog.stop()
        await broker.stop_background()
        broker.close()
        log.info("shut down cleanly")
    if broker.fatal_error is not None:
        raise LogDirOfflineError(broker.fatal_error)  # exit status 1, as Kafka halts


async def _start_metrics(config: BrokerConfig) -> MetricsEndpoint | None:
    """The metrics endpoint when ``metrics.listener`` is set, listening before the logs load;
    a bind failure refuses start-up like the Kafka listener's."""
    address = config.metrics_listener
    if address is None:
        return None
    metrics = MetricsEndpoint(config, *address)
    try:
        await metrics.start()
    except OSError as exc:
        raise ListenerError(f"cannot listen on metrics.listener {metrics.url}: "
                            f"{_reason(exc)}") from exc
    return metrics


def _console_listener(config: BrokerConfig) -> Listener | None:
    """With ``console.enable``: the listener the console connects to (the first PLAINTEXT
    one: it has no credentials of its own); refuses a config it cannot serve."""
    if not config.console_enable:
        return None
    if config.metrics_listener is None:
        raise ConfigError("console.enable", "true", "the console is served on the "
                          "metrics.listener port, which is not set")
    for listener in config.listeners:
        if listener.security_protocol == "PLAINTEXT":
            return listener
    raise ConfigError("console.enable", "true", "the console needs a PLAINTEXT listener")


async def _start_console(listener: Listener | None,
                         metrics: MetricsEndpoint | None) -> ConsoleChild | None:
    """With ``console.enable``: the web console as a child process, relayed under
    ``/console/`` by the metrics endpoint (see :mod:`.console_child`)."""
    if listener is None or metrics is None:
        return None
    host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    console = ConsoleChild(f"{host}:{listener.port}", f"{metrics.url}/metrics")
    await console.start()
    metrics.console_port = console.port
    return console


async def _controlled_shutdown(broker: Broker) -> None:
    """In a cluster, hand leadership over before stopping (``controlled.shutdown.enable``);
    not when the broker stops because its log dirs failed (it halts, as Kafka's does)."""
    config = broker.config
    if broker.cluster is None or not config.controlled_shutdown_enable \
            or broker.fatal_error is not None:
        return
    try:
        await controlled_shutdown(broker.cluster, config.controlled_shutdown_max_retries,
                                  config.controlled_shutdown_retry_backoff_ms)
    except Exception as exc:  # never let it keep the broker from stopping
        log.warning("controlled shutdown failed: %s: %s", type(exc).__name__, exc)
        log.debug("controlled shutdown failed", exc_info=True)


def _reason(exc: OSError) -> str:
    """The system's words for a bind failure ("Address already in use"), without the
    address asyncio repeats in its message."""
    if exc.errno is not None and exc.errno > 0:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)  # resolver errors (negative codes) carry their own text


#: Target when the hard limit is "unlimited" (Linux's default fs.nr_open).
_NOFILE_UNLIMITED_TARGET = 1 << 20


def raise_open_file_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as the JVM does for Kafka."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = _NOFILE_UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("open file limit raised from %d to %d", soft, target)
    except (OSError, ValueError) as exc:
        log.warning("could not raise the open file limit: %s", exc)


def run_broker(config: BrokerConfig) -> None:
    """Start a broker and block until SIGINT or SIGTERM."""
    logging.basicConfig(
        level=parse_log_level(os.environ.get(ENV_VAR)),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    raise_open_file_limit()
    loop = _new_event_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        loop.run_until_complete(serve(config, stop))
    finally:
        loop.close()
