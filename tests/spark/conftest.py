"""Spark test fixtures: one local[2] SparkSession for the whole run, a real PostgreSQL.

A SparkSession takes seconds to start and each query several more, so every Spark test
shares one session (UI off, two shuffle partitions, UTC). Python workers must run this
interpreter (it has moldau installed, which the workers import to run the data source).
Without Java or pyspark the tests skip and say why; CI installs both, so there they run.
PostgreSQL is started from Debian's binaries in a temporary directory (as the
``postgres`` user when we are root, since PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic


def _missing_requirement() -> str | None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java is not installed (apt-get install openjdk-17-jre-headless)"
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install -e '.[spark]')"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _missing_requirement()
    if reason:
        pytest.skip(f"Spark tests need Java and pyspark: {reason}")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from moldau.spark import register

    session = (SparkSession.builder.master("local[2]").appName("moldau-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A fresh PostgreSQL server for the session; its DSN."""
    from moldau.spark.pipelines.local_postgres import LocalPostgres, find_bindir

    try:
        find_bindir()
    except RuntimeError as exc:
        pytest.skip(f"PostgreSQL tests need the server binaries: {exc}")
    server = LocalPostgres().start()
    try:
        yield server.dsn
    finally:
        server.stop()


def fresh_database(server_dsn: str) -> str:
    """A new empty database on the session's server, so tests never see each other's rows."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    return server_dsn.rsplit("/", 1)[0] + "/" + name


def create_topic(bootstrap: str, partitions: int = 2, prefix: str = "spark") -> str:
    """A new topic with a unique name."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name
