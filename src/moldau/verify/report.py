"""Rendering a :class:`Verdict` for people (text) and for programs (JSON).

Counts are always exact; the lists of anomalies are cut to ``max_examples`` per kind, because
a run that lost a million records needs the number and a few examples, not a million lines.
"""

from __future__ import annotations

import json
from typing import Any

from .checker import Verdict
from .history import History

_KIND_HEADERS = {
    "aborted_read": "a value of an aborted transaction was read",
    "lost": "acknowledged, never read",
    "duplicated": "one value read at several offsets",
    "reordered": "a producer's values out of send order within a partition",
    "inconsistent": "an offset with two values, or an ack the log contradicts",
    "unexpected": "values of this run that were never sent",
}


def _header(kind: str, verdict: Verdict) -> str:
    if kind == "lost" and verdict.transactional:
        return "of a committed transaction, never read"
    return _KIND_HEADERS[kind]


def _example(kind: str, item: Any) -> str:
    if kind in ("aborted_read", "in_doubt_read"):
        return (f"producer {item.value[0]} seq {item.value[1]} (its transaction "
                f"{item.txn}) read at {item.partition}:{item.offset}")
    if kind == "lost":
        value = f"producer {item.value[0]} seq {item.value[1]}"
        if item.partition < 0:
            return f"{value}: never acknowledged"
        if item.offset is None:
            return f"{value} acked in partition {item.partition} without an offset"
        return f"{value} acked at {item.partition}:{item.offset}"
    if kind == "duplicated":
        where = ", ".join(f"{p}:{o}" for p, o in item.locations)
        return f"producer {item.value[0]} seq {item.value[1]} at {where}"
    if kind == "reordered":
        return (f"partition {item.partition} offset {item.offset}: producer {item.producer} "
                f"seq {item.seq} after seq {item.after_seq}")
    if kind == "inconsistent":
        if item.offset < 0:  # an ack without an offset
            return f"partition {item.partition}: {item.reason}"
        return f"{item.partition}:{item.offset} {item.reason}"
    return f"producer {item.value[0]} seq {item.value[1]} at {item.partition}:{item.offset}"


def failing_kinds(verdict: Verdict, allowed: tuple[str, ...] = ()) -> list[str]:
    """The anomaly kinds found that fail the run (all found, except those ``allowed``)."""
    return [kind for kind, count in verdict.anomaly_counts.items()
            if count and kind not in allowed]


def _transaction_figures(verdict: Verdict, max_examples: int) -> dict[str, Any]:
    """The transactional run's own figures (JSON), in-doubt reads as information."""
    return {
        "transactions": verdict.transactions,
        "chosen_aborts": verdict.chosen_aborts,
        "committed_values": verdict.committed_values,
        "committed_values_read": verdict.committed_values_read,
        "aborted_values": verdict.aborted_values,
        "aborted_values_acked": verdict.aborted_values_acked,
        "aborted_values_read": len({item.value for item in verdict.aborted_read}),
        "in_doubt_values": verdict.in_doubt_values,
        "in_doubt_read": len(verdict.in_doubt_read),
        "in_doubt_read_examples": [_example("in_doubt_read", item)
                                   for item in verdict.in_doubt_read[:max_examples]],
    }


def as_dict(verdict: Verdict, history: History, settings: dict[str, Any],
            max_examples: int, allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The whole verdict as JSON-ready data (``examples`` cut to ``max_examples`` per kind)."""
    data: dict[str, Any] = {
        "clean": verdict.clean,
        "allowed": list(allowed),
        "failing": failing_kinds(verdict, allowed),
        "run_id": history.run_id,
        "topic": history.topic,
        "partitions": history.partitions,
        "settings": settings,
        "sent": verdict.sent,
        "acked": verdict.acked,
        "acked_without_offset": verdict.acked_without_offset,
        "failed": verdict.failed,
        "failed_but_read": verdict.failed_but_read,
        "records_read": verdict.records_read,
        "values_read": verdict.values_read,
        "foreign": verdict.foreign,
        "read_errors": verdict.read_errors,
        "read_complete": verdict.read_complete,
        "produce_seconds": round(verdict.produce_seconds, 3),
        "read_seconds": round(verdict.read_seconds, 3),
        "timed_acks": verdict.timed_acks,
        "acked_per_second": round(verdict.acked_per_second, 1),
        "ack_latency_ms": {k: round(v, 3) for k, v in verdict.latency_ms.items()},
        "nemesis": [{"at_s": round(e.at_s, 3), "event": e.description}
                    for e in history.nemesis_events],
        "anomalies": verdict.anomaly_counts,
        "examples": {kind: [_example(kind, item) for item in getattr(verdict, kind)[:max_examples]]
                     for kind in verdict.kinds},
    }
    if verdict.transactional:
        data["transactional"] = _transaction_figures(verdict, max_examples)
    return data


def as_json(verdict: Verdict, history: History, settings: dict[str, Any],
            max_examples: int, allowed: tuple[str, ...] = ()) -> str:
    return json.dumps(as_dict(verdict, history, settings, max_examples, allowed), indent=2)


def as_text(verdict: Verdict, history: History, settings: dict[str, Any],
            max_examples: int, allowed: tuple[str, ...] = ()) -> str:
    """A few lines of figures, then each anomaly kind found with up to ``max_examples``."""
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    lat = verdict.latency_ms
    latency = ("  ".join(f"{k} {v:.1f} ms" for k, v in lat.items()) if lat else "none timed")
    lines = [
        f"moldau verify run {history.run_id}: topic {history.topic} "
        f"({history.partitions} partitions); {shown}",
        f"produced: {verdict.sent} sent, {verdict.acked} acked, {verdict.failed} failed "
        f"in {verdict.produce_seconds:.2f} s ({verdict.acked_per_second:.0f} acked records/s)",
        f"ack latency: {latency}",
        f"read: {verdict.records_read} records, {verdict.values_read} distinct values of this "
        f"run, {verdict.foreign} foreign, in {verdict.read_seconds:.2f} s; "
        + ("every partition read to its acknowledged end" if verdict.read_complete
           else "read timeout before the acknowledged end of every partition"),
        f"indeterminate: {verdict.failed} failed sends, {verdict.failed_but_read} of them read",
    ]
    if verdict.acked_without_offset:
        lines.append(f"acked without an offset (client's implicit acks, checked for loss "
                     f"only): {verdict.acked_without_offset}")
    if verdict.transactional:
        lines.extend(_transaction_lines(verdict, max_examples))
    if verdict.read_errors:
        lines.append(f"read errors: {verdict.read_errors} (first: {history.read_errors[0]})")
    for event in history.nemesis_events:
        lines.append(f"nemesis at {event.at_s:.1f} s: {event.description}")
    counts = verdict.anomaly_counts
    lines.append("anomalies: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for kind in verdict.kinds:
        items = getattr(verdict, kind)
        if not items:
            continue
        lines.append(f"{kind} ({_header(kind, verdict)}): {len(items)}")
        lines.extend(f"  {_example(kind, item)}" for item in items[:max_examples])
        if len(items) > max_examples:
            lines.append(f"  ... {len(items) - max_examples} more")
    if verdict.clean:
        lines.append("result: clean")
    elif failing_kinds(verdict, allowed):
        lines.append("result: ANOMALIES FOUND")
    else:
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        lines.append(f"result: only allowed anomalies ({shown}; --allow)")
    return "\n".join(lines)


def _transaction_lines(verdict: Verdict, max_examples: int) -> list[str]:
    """Transactions per outcome, committed values read, and in-doubt reads (information)."""
    counts = verdict.transactions
    lines = [
        f"transactions: {counts.get('committed', 0)} committed, {counts.get('aborted', 0)} "
        f"aborted ({verdict.chosen_aborts} on purpose), {counts.get('in-doubt', 0)} in doubt",
        f"committed values: {verdict.committed_values}, read {verdict.committed_values_read}; "
        f"aborted values: {verdict.aborted_values}, {verdict.aborted_values_acked} of them "
        f"written (acked), read {len({i.value for i in verdict.aborted_read})}",
        f"values in doubt: {verdict.in_doubt_values}, read {len(verdict.in_doubt_read)} "
        f"(information, no anomaly)",
    ]
    lines.extend(f"  in doubt, read: {_example('in_doubt_read', item)}"
                 for item in verdict.in_doubt_read[:max_examples])
    return lines
