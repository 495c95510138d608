"""The strategy chart: context size per turn for the four strategies, as an SVG.

Invariant: :func:`render_chart` is a pure function of the comparison report; the same
report gives the same bytes (fixed number formatting, no timestamps, no random ids).
Like the site's other diagrams it draws its own light card with explicit colours, so it
reads the same in the light and the dark palette; the series differ by dash pattern as
well as by colour, so they stay apart in grey scale and for colour-blind readers.

Two panels share the x axis (turns): the top one shows the whole range with the model
window as a line; the bottom one zooms into the lowest part, where truncation and our
strategy live.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["SERIES_STYLE", "render_chart"]

SERIES_STYLE: Mapping[str, tuple[str, str, float]] = {
    "full": ("#b5523b", "", 2.0),
    "truncate": ("#6f6f6f", "2 4", 2.0),
    "agent": ("#c07a12", "9 5", 2.2),
    "ours": ("#2a6592", "", 2.8),
}
"""Strategy name -> (stroke colour, dash pattern, width)."""

_WIDTH, _HEIGHT = 960, 700
_LEFT, _RIGHT = 92, 36
_INK, _MUTED, _GRID, _CARD, _EDGE = "#3b2f2a", "#6f5f54", "#e4d8c3", "#fbf7f0", "#d9c9ae"
_FONT = "'Noto Sans CJK SC','Source Han Sans SC','PingFang SC','Microsoft YaHei',sans-serif"


def _nice_ceiling(value: float) -> int:
    """The next 1/2/2.5/5 x 10^k at or above ``value``."""
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return int(step * power)
    return int(10 * power)


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _thousands(value: int) -> str:
    return f"{value // 1000}k" if value >= 1000 and value % 1000 == 0 else f"{value:,}"


def _panel(out: list[str], runs: Sequence[Mapping[str, Any]], top: int, height: int, y_max: int,
           turns: int, clip: str, window: int | None, title: str) -> None:
    plot_w = _WIDTH - _LEFT - _RIGHT

    def x(turn: float) -> float:
        return _LEFT + (turn - 1) / max(turns - 1, 1) * plot_w

    def y(value: float) -> float:
        return top + height - min(value, y_max * 1.02) / y_max * height

    out.append(f'<text x="{_LEFT}" y="{top - 14}" font-size="15" fill="{_MUTED}">{escape(title)}</text>')
    out.append(f'<clipPath id="{clip}"><rect x="{_LEFT}" y="{top - 2}" width="{plot_w}" height="{height + 2}"/>'
               "</clipPath>")
    for i in range(5):
        value = y_max * i // 4
        yy = _fmt(y(value))
        out.append(f'<line x1="{_LEFT}" y1="{yy}" x2="{_LEFT + plot_w}" y2="{yy}" stroke="{_GRID}" stroke-width="1"/>')
        out.append(f'<text x="{_LEFT - 10}" y="{_fmt(y(value) + 5)}" font-size="13" text-anchor="end" '
                   f'fill="{_MUTED}">{_thousands(value)}</text>')
    step = 100 if turns >= 300 else 20
    for turn in range(step, turns + 1, step):
        xx = _fmt(x(turn))
        out.append(f'<line x1="{xx}" y1="{top}" x2="{xx}" y2="{top + height}" stroke="{_GRID}" stroke-width="1"/>')
        out.append(f'<text x="{xx}" y="{top + height + 20}" font-size="13" text-anchor="middle" '
                   f'fill="{_MUTED}">{turn}</text>')
    if window is not None and window <= y_max:
        wy = _fmt(y(window))
        out.append(f'<line x1="{_LEFT}" y1="{wy}" x2="{_LEFT + plot_w}" y2="{wy}" stroke="{_INK}" '
                   'stroke-width="1.5" stroke-dasharray="1 3"/>')
        out.append(f'<text x="{_LEFT + 8}" y="{_fmt(y(window) - 7)}" font-size="13" '
                   f'fill="{_INK}">模型窗口 {window:,} token</text>')
    out.append(f'<g clip-path="url(#{clip})" fill="none" stroke-linejoin="round" stroke-linecap="round">')
    for run in runs:
        color, dash, width = SERIES_STYLE[run["name"]]
        tokens = run["series"]["tokens"]
        points = " ".join(f"{_fmt(x(i + 1))},{_fmt(y(v))}" for i, v in enumerate(tokens))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{points}" stroke="{color}" stroke-width="{width}"{dash_attr}/>')
    out.append("</g>")
    out.append(f'<rect x="{_LEFT}" y="{top}" width="{plot_w}" height="{height}" fill="none" stroke="{_EDGE}"/>')


def render_chart(report: Mapping[str, Any]) -> str:
    """The SVG text for a :func:`harness.eval.strategies.compare` report."""
    runs = report["strategies"]
    settings = report["settings"]
    turns = int(report["chat"]["turns"])
    window = int(settings["window_tokens"])
    top_max = _nice_ceiling(max(max(r["series"]["tokens"]) for r in runs))
    low = [r for r in runs if r["name"] in ("truncate", "ours")]
    zoom_max = _nice_ceiling(max(max(r["series"]["tokens"]) for r in low) * 1.15)
    labels = {r["name"]: r["label"] for r in runs}
    title = "每轮送进模型的上下文有多大（估算 token）"
    desc = (f"{turns} 轮的合成长对话上，四种策略每轮上下文的估算 token 数。"
            "全量回放一路涨到窗口的数倍；通用 agent 压缩按字符数÷4 估算，每次都在超出窗口之后才压；"
            "截断保持很小但早期的事全丢；梨园的剧情压缩在几千到一万多 token 之间呈锯齿。摘要来自脚本，不是模型输出。")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" role="img" aria-labelledby="t d">',
        f'<title id="t">{escape(title)}</title>',
        f'<desc id="d">{escape(desc)}</desc>',
        f'<rect x="1" y="1" width="{_WIDTH - 2}" height="{_HEIGHT - 2}" rx="18" fill="{_CARD}" stroke="{_EDGE}" '
        'stroke-width="2"/>',
        f'<g font-family="{_FONT}" fill="{_INK}">',
        f'<text x="40" y="48" font-size="24" font-weight="700">{escape(title)}</text>',
        f'<text x="40" y="76" font-size="14" fill="{_MUTED}">横轴：第几轮；纵轴：liyuan.tokens.estimate_tokens '
        f'的估算。摘要由脚本摘要器生成（不是模型输出），只看大小，不看质量。</text>',
    ]
    for slot, name in enumerate(n for n in ("full", "agent", "truncate", "ours") if n in labels):
        legend_x = 40 + slot * 220
        color, dash, width = SERIES_STYLE[name]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{legend_x}" y1="104" x2="{legend_x + 36}" y2="104" stroke="{color}" '
                   f'stroke-width="{width + 1}"{dash_attr}/>')
        out.append(f'<text x="{legend_x + 44}" y="109" font-size="15">{escape(labels[name])}</text>')
    _panel(out, runs, 150, 260, top_max, turns, "clip-all", window, "全程（虚线横线是模型窗口）")
    _panel(out, runs, 480, 160, zoom_max, turns, "clip-zoom", window, f"放大最下面 0 – {_thousands(zoom_max)} token")
    out.append(f'<text x="{_LEFT + (_WIDTH - _LEFT - _RIGHT) / 2:.0f}" y="{_HEIGHT - 14}" font-size="14" '
               f'text-anchor="middle" fill="{_MUTED}">第几轮</text>')
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
