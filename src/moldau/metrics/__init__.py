"""Prometheus metrics and health checks of the broker (``metrics.listener``).

``counters`` holds what the hot paths count (plain ints), ``collector`` builds the Prometheus
families at scrape time, ``endpoint`` serves them over HTTP on the broker's loop with the
health checks of ``health``; ``histogram`` is a dependency-free latency histogram any layer
may fill, ``loop_lag`` measures the event loop's lag.
"""
