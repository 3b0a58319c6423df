"""Inline-SVG sparkline geometry for server-rendered charts (dashboard tok/s over time).

Returns the `points` attribute of an SVG <polyline>; templates draw it. No drawing
library, no CDN. The browser's live sparkline does the same in JS (frontend/src/sparkline.js).
"""
from __future__ import annotations


def sparkline_points(values: list[float], width: int = 120, height: int = 28, pad: float = 2.0) -> str:
    """Scale `values` into a width x height box (y grows downwards), oldest on the left."""
    if not values:
        return ""
    top = max(values) or 1.0
    n = len(values)
    step = (width - 2 * pad) / max(n - 1, 1)
    points = []
    for i, v in enumerate(values):
        x = pad + i * step
        y = height - pad - (max(v, 0.0) / top) * (height - 2 * pad)
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)
