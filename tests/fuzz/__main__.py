"""``make fuzz``: a long fuzz run against a fresh broker, figures printed as JSON at the end.

    python -m tests.fuzz --frames 1000000 --seconds 3600 --seed 1

Exit status 0 when the broker survived with no traceback or ERROR line in its log, bounded
RSS, and every acknowledged record read back in order; 1 otherwise (the JSON says why, and
on a crash the last frames of every connection are written to ``crash-frames.txt`` in the
work directory, hex, one per line, to replay).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.conftest import TEST_BROKER_OVERRIDES
from tests.helpers import BrokerProcess

from .driver import FuzzConfig, run_fuzz
from .mutate import DEFAULT_WEIGHTS

RSS_BOUND_MB = 300.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=3600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rss-bound-mb", type=float, default=RSS_BOUND_MB)
    parser.add_argument("--without", action="append", default=[], choices=sorted(DEFAULT_WEIGHTS),
                        help="leave out a mutation kind (repeatable)")
    parser.add_argument("--skip-api", type=int, action="append", default=[],
                        help="leave an API key out of the corpus (repeatable), e.g. 37")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the broker keeps its data and logs (default: a temp dir)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="moldau-fuzz-"))
    weights = {k: (0 if k in args.without else w) for k, w in DEFAULT_WEIGHTS.items()}
    config = FuzzConfig(frames=args.frames, seconds=args.seconds, seed=args.seed,
                        connections=args.connections, weights=weights,
                        skip_apis=frozenset(args.skip_api))
    broker = BrokerProcess(workdir, overrides=TEST_BROKER_OVERRIDES).start()
    try:
        report = run_fuzz(broker, config)
    finally:
        broker.stop()
    summary = report.summary()
    summary["broker_log"] = str(broker.stderr_path)
    summary["rss_bound_mb"] = args.rss_bound_mb
    summary["skipped_apis"] = sorted(args.skip_api)
    for line in report.bad_log_lines[:20]:
        print(line, file=sys.stderr)
    if report.recent_frames:
        crash_file = workdir / "crash-frames.txt"
        crash_file.write_text("\n".join(report.recent_frames) + "\n")
        summary["crash_frames"] = str(crash_file)
    print(json.dumps(summary))
    failed = (report.crashes or report.tracebacks or report.bad_log_lines or report.lost
              or report.out_of_order or report.max_rss_mb > args.rss_bound_mb)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
