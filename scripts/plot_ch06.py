#!/usr/bin/env python3
"""scripts/plot_ch06.py — chapter 06's picture: loss and replica drift per step.

Reads the metrics JSONL that `ch06_averaging --metrics FILE` writes (one
object per step, keys "loss:<setting>" and "drift:<setting>") and writes one
SVG with two panels: the global-batch loss of every setting, and the drift
max |w_r - w_0| between replicas just before averaging. Standard library only.

    build/reference/bin/ch06_averaging --ranks 4 --metrics ch06.jsonl
    python3 scripts/plot_ch06.py ch06.jsonl ch06.svg

Left out: interactivity, log axes (gradient averaging's drift is exactly 0).
"""

import json
import math
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
PANEL_W, PANEL_H, MARGIN, LEGEND_H = 460, 300, 56, 22


def read_series(path):
    """{"loss": {setting: [(step, value)]}, "drift": {…}} from the JSONL file."""
    series = {"loss": {}, "drift": {}}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_ch06: {path} line {number} is not JSON ({e.msg})")
            for key, value in row.items():
                kind, _, setting = key.partition(":")
                if kind in series and setting and isinstance(value, (int, float)) and math.isfinite(value):
                    series[kind].setdefault(setting, []).append((row["step"], float(value)))
    if not series["loss"]:
        sys.exit(f"plot_ch06: {path} has no 'loss:<setting>' values; write it with ch06_averaging --metrics")
    return series


def nice_ticks(low, high, count=5):
    """About `count` round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def panel(x0, title, lines, colour_of):
    """SVG elements of one panel at horizontal offset x0: axes, ticks, one polyline per setting."""
    points = [p for pts in lines.values() for p in pts]
    xmax = max(s for s, _ in points) or 1
    yticks = nice_ticks(min(0.0, min(v for _, v in points)), max(v for _, v in points))
    ylow, yhigh = yticks[0], yticks[-1]
    left, top, width, height = x0 + MARGIN, MARGIN // 2 + 8, PANEL_W - MARGIN - 12, PANEL_H - MARGIN
    sx = lambda s: left + width * s / xmax  # noqa: E731
    sy = lambda v: top + height * (1 - (v - ylow) / ((yhigh - ylow) or 1))  # noqa: E731
    out = [f'<text x="{left + width / 2}" y="{top - 10}" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#888"/>']
    for v in yticks:
        out.append(f'<line x1="{left}" x2="{left + width}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 4}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    for s in nice_ticks(0, xmax):
        if s <= xmax:
            out.append(f'<text x="{sx(s):.1f}" y="{top + height + 14}" text-anchor="middle">{s:g}</text>')
    out.append(f'<text x="{left + width / 2}" y="{top + height + 30}" text-anchor="middle">step</text>')
    for setting, pts in lines.items():
        path = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in pts)
        out.append(f'<polyline fill="none" stroke="{colour_of[setting]}" stroke-width="1.3" points="{path}"/>')
    return out


def svg(series):
    settings = list(series["loss"])
    colour_of = {s: COLOURS[i % len(COLOURS)] for i, s in enumerate(settings)}
    rows = (len(settings) + 2) // 3
    width, height = 2 * PANEL_W, PANEL_H + 14 + rows * LEGEND_H
    body = panel(0, "global-batch loss", series["loss"], colour_of)
    body += panel(PANEL_W, "replica drift max |w_r - w_0| before averaging", series["drift"] or series["loss"], colour_of)
    for i, s in enumerate(settings):
        x, y = 20 + (i % 3) * (width - 40) / 3, PANEL_H + 14 + (i // 3) * LEGEND_H
        body.append(f'<line x1="{x}" x2="{x + 24}" y1="{y}" y2="{y}" stroke="{colour_of[s]}" stroke-width="3"/>')
        body.append(f'<text x="{x + 30}" y="{y + 4}">{escape(s)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="Helvetica, Arial, sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: plot_ch06.py METRICS.jsonl OUT.svg")
    try:
        series = read_series(argv[1])
    except OSError as e:
        sys.exit(f"plot_ch06: cannot read {argv[1]} ({e.strerror})")
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(svg(series))
    print(f"wrote {argv[2]}: {len(series['loss'])} settings, {max(len(p) for p in series['loss'].values())} steps")


if __name__ == "__main__":
    main(sys.argv)
