"""``python -m bench``: moldau and Tansu side by side, same workloads, same client settings.

    python -m bench [--quick] [--reps N] [--only throughput,latency,...] [--no-peer]

Prints each sample as a JSON line as it is measured, then a table of median (min-max) per
broker with the moldau/Tansu ratio. Everything is also written to bench/results/<stamp>.jsonl
(git-ignored); ``python -m bench.chart`` turns such a file into docs/bench.png. Brokers, kcat and
worker processes are stopped and temporary dirs removed at the end, also after Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka
from rich.console import Console

from . import clients, machine, peer, procs, report
from .suite import FULL, QUICK, Suite

RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = ("limits", *Suite.SECTIONS)


def _git_commit() -> str:
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return f"{head}{'+dirty' if dirty else ''}"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smaller workloads (about 4 minutes instead of about 10)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per workload (default 3)")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated sections to run (default all: {','.join(SECTIONS)})")
    p.add_argument("--no-peer", action="store_true", help="measure moldau alone")
    p.add_argument("--cache", type=Path, default=peer.DEFAULT_CACHE,
                   help=f"where the peer binary is kept (default {peer.DEFAULT_CACHE})")
    p.add_argument("--tmp-dir", type=Path, default=None,
                   help="parent of the run's temporary dir (broker data, dd test file)")
    p.add_argument("--out", type=Path, default=None, help="results file (.jsonl)")
    p.add_argument("--quiet", action="store_true", help="do not echo JSON lines to stdout")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    if args.reps < 1:
        p.error("--reps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    scale = QUICK if args.quick else FULL
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or RESULTS / f"{stamp}-{scale.name}.jsonl"
    console = Console(stderr=True)
    rec = report.Recorder(out, echo=None if args.quiet else sys.stdout)
    # SIGTERM/SIGHUP take the same way out as Ctrl-C: brokers stopped, temp dir removed.
    procs.route_signals_to_main()
    tmp = Path(tempfile.mkdtemp(prefix="moldau-sbs-", dir=args.tmp_dir))
    suite: Suite | None = None
    notes: list[str] = []
    interrupted = False
    started = time.monotonic()
    try:
        tansu, peer_reason = None, "peer not measured (--no-peer)"
        if not args.no_peer:
            try:
                tansu = peer.tansu_binary(args.cache)
            except Exception as e:
                peer_reason = f"Tansu unavailable: {type(e).__name__}: {e}"[:300]
                console.print(f"[yellow]{peer_reason}[/]")
        lib = peer.bundled_librdkafka_dir(args.cache)
        meta: dict[str, Any] = {
            "kind": "meta", "stamp": stamp, "scale": scale.name, "reps": args.reps,
            "sections": args.sections, "moldau_commit": _git_commit(),
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
            "kcat": clients.kcat_version(lib), "kcat_system": clients.kcat_version(None),
            "tansu": peer.tansu_version(tansu) if tansu else None,
            "load_average": machine.load_average(), "scale_params": scale.__dict__,
        }
        rec.write(meta)
        notes.append(f"scale {scale.name}, {args.reps} repetitions, moldau {meta['moldau_commit']}"
                     f", {meta['tansu'] or 'no peer'}, librdkafka {meta['librdkafka']} "
                     f"(kcat runs with the same library), load average at start "
                     f"{meta['load_average']}")
        suite = Suite(scale, args.reps, rec, tmp, tansu, peer_reason, lib)
        for section in args.sections:
            t0 = time.monotonic()
            into = time.monotonic() - started
            console.print(f"[bold]== {section}[/] ({into:.0f} s into the run)")
            try:
                if section == "limits":
                    suite.machine_limits()
                else:
                    getattr(suite, section)()
            except Exception as e:  # e.g. a broker that would not start: the next section may
                why = f"{type(e).__name__}: {e}"[:400]
                rec.write({"kind": "section_error", "section": section, "error": why})
                notes.append(f"section {section} stopped early: {why}")
                console.print(f"[red]section {section} stopped early: {why}[/]")
                suite.close()
            console.print(f"   {section} took {time.monotonic() - t0:.0f} s")
        notes += suite.notes
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: stopping brokers and cleaning up[/]")
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            if suite is not None:
                suite.close()
            procs.kill_all()
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    for line in report.summary_lines(rec.samples):
        rec.write(line)
    rec.write({"kind": "end", "seconds": round(elapsed, 1), "interrupted": interrupted,
               "load_average": machine.load_average()})
    rec.close()
    limits = rec.limits
    if limits:
        notes.append("limits: " + ", ".join(f"{k} {v:,.0f} MB/s" for k, v in limits.items()))
    if interrupted:
        notes.append("INTERRUPTED: the table shows only what was measured before the stop")
    notes.append(f"run took {elapsed:.0f} s; results in {out}")
    report.print_report(rec.samples, limits, notes, Console())
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
