"""The web console's pure parts: decoding, charts and rates (no broker, no browser)."""

from __future__ import annotations

import json

from moldau.console.charts import bars, human_size, sparkline
from moldau.console.decode import decode
from moldau.console.throughput import History, Sample, rate


def test_auto_decoding_prefers_json_then_utf8_then_hex() -> None:
    assert decode(b'{"a": [1, 2]}').kind == "json"
    assert json.loads(decode(b'{"a": [1, 2]}').text) == {"a": [1, 2]}
    assert decode("grüße".encode()) .text == "grüße"
    assert decode(b"42").kind == "utf8"  # a bare JSON number is shown as the text it is
    assert decode(b"\xff\x00\x01") == decode(b"\xff\x00\x01", "hex")
    assert decode(b"\xff\x00\x01").text == "ff 00 01"
    assert decode(None).text == "null"


def test_asking_for_the_wrong_decoding_says_so() -> None:
    assert decode(b"not json", "json").kind == "error: not JSON"
    assert decode(b"\xff", "utf8").kind == "error: not UTF-8"
    assert decode(b"plain", "hex").text == "70 6c 61 69 6e"


def test_rates_are_deltas_over_time_and_never_negative() -> None:
    assert rate(100, 150, 2.0) == 25.0
    assert rate(150, 10, 1.0) == 0.0  # a topic deleted and created again
    assert rate(None, 10, 1.0) is None
    history = History(size=3)
    for at, end in ((0.0, 0), (1.0, 10), (2.0, 30), (3.0, 60)):
        history.add(Sample(at, {"t": end}))
    assert history.in_rates("t") == [20.0, 30.0]  # the oldest sample fell out of the ring
    assert history.total_in_rates() == [20.0, 30.0]
    assert history.topics() == ["t"]


def test_charts_are_inline_svg_with_escaped_labels() -> None:
    assert str(sparkline([])).startswith("<svg")
    assert "points=" in sparkline([1.0, 3.0, 2.0])
    chart = str(bars([("<t>:0", 5), ("t:1", 0)]))
    assert "&lt;t&gt;:0" in chart and "<t>" not in chart
    assert chart.count("<rect") == 2


def test_sizes_read_like_du_h() -> None:
    assert [human_size(n) for n in (None, 0, 1023, 1024, 1536, 5 * 1024**3, 3 * 1024**4)] == [
        "-", "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 GiB", "3.0 TiB"]


def test_avro_without_a_registry_says_how_to_configure_one() -> None:
    shown = decode(b"\x00\x00\x00\x00\x01\x0a/home", "avro")
    assert shown.kind == ("error: no schema registry configured "
                          "(moldau console --schema-registry URL)")
    assert shown.text.startswith("00 00 00 00 01")
