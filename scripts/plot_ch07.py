#!/usr/bin/env python3
"""scripts/plot_ch07.py — chapter 07's picture: memory per rank by category, per ZeRO stage.

Reads the JSON that `ch07_zero --compare-stages --report-json FILE` writes (one
file per number of ranks N) and writes one SVG with two panels:
  left:  rank 0's memory at its peak, stacked by category (parameters,
         gradients, optimizer state, activations, comm buffers), one bar per
         stage, for the first file's N, with the ZeRO formula as a tick;
  right: the peak per rank (worst rank) against N, one line per stage, with
         the formula dashed — what sharding buys as ranks are added.
Standard library only.

    for n in 1 2 4 8; do
      build/reference/bin/ch07_zero --ranks $n --compare-stages --steps 5 --quiet --report-json ch07_n$n.json
    done
    python3 scripts/plot_ch07.py docs/figures/ch07_memory.svg ch07_n4.json ch07_n1.json ch07_n2.json ch07_n8.json

Left out: interactivity, per-rank bars (the ranks differ only by padding).
"""

import json
import sys
from xml.sax.saxutils import escape

CATEGORIES = ["parameters", "gradients", "optimizer state", "activations", "comm buffers"]
COLOURS = {"parameters": "#1f77b4", "gradients": "#ff7f0e", "optimizer state": "#2ca02c",
           "activations": "#9467bd", "comm buffers": "#8c564b"}
STAGE_COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
PANEL_W, PANEL_H, MARGIN = 430, 300, 60
MIB = 1024.0 * 1024.0


def load(paths):
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if "stages" not in data:
            sys.exit("%s: not a --compare-stages report (no 'stages')" % path)
        runs.append(data)
    return runs


def text(x, y, s, size=11, anchor="middle", extra=""):
    return '<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" %s>%s</text>' % (x, y, size, anchor, extra, escape(s))


def axis(x0, y0, top, label, ticks):
    out = ['<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (x0, y0, x0, y0 - PANEL_H)]
    for value in ticks:
        y = y0 - PANEL_H * value / top
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + PANEL_W, y))
        out.append(text(x0 - 6, y + 4, "%.1f" % value, 10, "end"))
    out.append(text(x0 - 42, y0 - PANEL_H / 2, label, 11, "middle",
                    'transform="rotate(-90 %.1f %.1f)"' % (x0 - 42, y0 - PANEL_H / 2)))
    return out


def nice_ticks(top):
    step = 0.5
    while top / step > 8:
        step *= 2
    return [i * step for i in range(int(top / step) + 1)]


def bars(first, x0, y0):
    stages = first["stages"]
    top = max(max(s["ranks"][0]["peak_total"], s["formula_bytes"]) for s in stages) / MIB * 1.1
    out = axis(x0, y0, top, "MiB on rank 0 at its peak", nice_ticks(top))
    out.append(text(x0 + PANEL_W / 2, y0 - PANEL_H - 14, "N = %d ranks, Ψ = %d: by category" % (first["world"], first["psi"]), 13))
    width = PANEL_W / (2 * len(stages))
    for i, stage in enumerate(stages):
        x = x0 + width * (2 * i + 0.5)
        y = y0
        for category in CATEGORIES:
            h = PANEL_H * stage["ranks"][0]["at_peak"].get(category, 0) / MIB / top
            y -= h
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>' % (x, y, width, h, COLOURS[category]))
        fy = y0 - PANEL_H * stage["formula_bytes"] / MIB / top
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>' % (x - 6, fy, x + width + 6, fy))
        out.append(text(x + width / 2, y0 + 16, "stage %d" % stage["stage"], 11))
        out.append(text(x + width / 2, y0 + 30, stage["formula"], 10))
    for j, category in enumerate(CATEGORIES):
        ly = y0 - PANEL_H + 14 * j
        out.append('<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/>' % (x0 + PANEL_W - 120, ly, COLOURS[category]))
        out.append(text(x0 + PANEL_W - 105, ly + 9, category, 10, "start"))
    ly = y0 - PANEL_H + 14 * len(CATEGORIES)
    out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>' % (x0 + PANEL_W - 120, ly + 5, x0 + PANEL_W - 110, ly + 5))
    out.append(text(x0 + PANEL_W - 105, ly + 9, "ZeRO formula", 10, "start"))
    return out


def lines(runs, x0, y0):
    runs = sorted(runs, key=lambda r: r["world"])
    worlds = [r["world"] for r in runs]
    peak = lambda s: max(r["peak_total"] for r in s["ranks"]) / MIB
    top = max(max(peak(s), s["formula_bytes"] / MIB) for r in runs for s in r["stages"]) * 1.1
    out = axis(x0, y0, top, "peak MiB per rank (worst rank)", nice_ticks(top))
    out.append(text(x0 + PANEL_W / 2, y0 - PANEL_H - 14, "as ranks are added", 13))
    xs = {w: x0 + PANEL_W * (i + 0.5) / len(worlds) for i, w in enumerate(worlds)}
    for w in worlds:
        out.append(text(xs[w], y0 + 16, "N = %d" % w, 11))
    for stage in range(4):
        colour = STAGE_COLOURS[stage]
        measured = [(xs[r["world"]], y0 - PANEL_H * peak(r["stages"][stage]) / top) for r in runs]
        formula = [(xs[r["world"]], y0 - PANEL_H * r["stages"][stage]["formula_bytes"] / MIB / top) for r in runs]
        for points, dash in ((measured, ""), (formula, 'stroke-dasharray="4 3"')):
            path = " ".join("%.1f,%.1f" % p for p in points)
            out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2" %s/>' % (path, colour, dash))
        for p in measured:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (p[0], p[1], colour))
        out.append(text(x0 + PANEL_W - 10, y0 - PANEL_H + 14 * stage + 10, "stage %d" % stage, 10, "end",
                        'fill="%s"' % colour))
    out.append(text(x0 + PANEL_W - 10, y0 - PANEL_H + 66, "solid: measured, dashed: formula", 10, "end"))
    return out


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: plot_ch07.py OUT.svg REPORT.json [MORE.json …]")
    runs = load(argv[2:])
    width, height = 2 * PANEL_W + 3 * MARGIN + 20, PANEL_H + 2 * MARGIN + 20
    body = ['<rect width="100%" height="100%" fill="white"/>']
    body += bars(runs[0], MARGIN + 20, MARGIN + PANEL_H)
    body += lines(runs, 2 * MARGIN + PANEL_W + 40, MARGIN + PANEL_H)
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">\n%s\n</svg>\n'
           % (width, height, "\n".join(body)))
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(svg)


if __name__ == "__main__":
    main(sys.argv)
