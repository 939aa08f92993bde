"""Charts drawn on the server as inline SVG: no JavaScript library, nothing from a CDN."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape


def sparkline(values: Sequence[float], width: int = 240, height: int = 40) -> Markup:
    """A polyline of ``values`` scaled to the box; a flat line when there is no data yet."""
    if len(values) < 2:
        values = [0.0, 0.0]
    top = max(values) or 1.0
    step = width / (len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values)
    )
    return Markup(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="records per second, peak {top:.1f}">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/>'
        "</svg>"
    )


def bars(items: Sequence[tuple[str, int]], width: int = 480, row: int = 20) -> Markup:
    """Horizontal bars with their label and value (used for lag per partition)."""
    if not items:
        return Markup("")
    label_width = 160
    top = max(value for _, value in items) or 1
    span = width - label_width - 60
    parts = [
        f'<svg class="bars" width="{width}" height="{row * len(items)}" role="img" '
        f'aria-label="lag per partition">'
    ]
    for i, (label, value) in enumerate(items):
        y = i * row
        length = max(1.0, value / top * span) if value else 0.0
        parts.append(
            f'<text x="0" y="{y + row - 6}">{escape(label)}</text>'
            f'<rect x="{label_width}" y="{y + 3}" width="{length:.1f}" height="{row - 6}"/>'
            f'<text x="{label_width + length + 6:.1f}" y="{y + row - 6}">{value}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def human_size(size: int | None) -> str:
    """Bytes as a person reads them (1024-based, like ``du -h``); ``-`` when unknown."""
    if size is None:
        return "-"
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
