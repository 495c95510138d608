"""The Markdown of the public-set snapshot (``sim/eval/public``, :mod:`harness.eval.public`).

Rendered from the JSON alone: the stamp, where each data set came from (repository,
commit, licence), one table per measure (rows: configurations, columns: sets), which data
chose each row, and a verdict per set computed from the figures (the default at least
:data:`MARGIN` above keyword search alone and not below e5 alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..bench.stamp import stamp_line

__all__ = ["MARGIN", "public_markdown", "verdicts"]

MARGIN = 0.02
"""How far the default must stand above keyword search alone (issue 36)."""

SET_NAMES = {"locomo-turn": "LoCoMo 每轮一段", "locomo-archive": "LoCoMo 归档段",
             "madial-zh-last": "MADial 中文·最后一句", "madial-zh-history": "MADial 中文·整段对话",
             "madial-en-last": "MADial 英文·最后一句", "madial-en-history": "MADial 英文·整段对话"}
SHORT_NAMES = {"locomo-turn": "LoCoMo 每轮", "locomo-archive": "LoCoMo 归档", "madial-zh-last": "MADial 中·末句",
               "madial-zh-history": "MADial 中·整段", "madial-en-last": "MADial 英·末句",
               "madial-en-history": "MADial 英·整段"}
"""Column heads (the tables stay within the page's column on a phone)."""
CHOSEN_BY = {"关键词": "单路，不用选", "e5": "单路，不用选",
             "默认": "本项目四套题的留一套交叉验证（公开数据没有参与）",
             "旧默认": "本项目的题上按语言拟合（e5 中文 3、英文 10）"}
MEASURES = {"hit": "前五条里至少有一条相关的题所占的比例（本项目自己那几套题用的就是这个）",
            "share": "相关条目里进了前五的比例，逐题平均（MADial-Bench 自己的 recall@k）"}


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def verdicts(data: Mapping[str, Any], measure: str = "hit") -> dict[str, tuple[bool, bool]]:
    """Per set: ``(default ≥ keyword + MARGIN, default ≥ e5)``, on ``measure``."""
    out = {}
    for name, result in data["sets"].items():
        recall = result["recall"]
        default = recall["默认"][measure]
        out[name] = (default >= recall["关键词"][measure] + MARGIN - 1e-9, default >= recall["e5"][measure] - 1e-9)
    return out


def _source(name: str, source: Mapping[str, Any]) -> str:
    return (f"- {name}：GitHub `{source['repo']}`，提交 `{source['commit']}`，{source['files']}；"
            f"许可 {source['licence']}。数据不在本仓库里。")


def _scope(result: Mapping[str, Any]) -> str:
    """``k 局，`` for a LoCoMo set (how many of the conversations it covers), else nothing."""
    return f"{len(result['conversations'])} 局，" if "conversations" in result else ""


def public_markdown(data: Mapping[str, Any]) -> str:
    """Tables and verdicts of the public-set snapshot (see the module docstring)."""
    sets = data["sets"]
    names = list(sets)
    configs = list(next(iter(sets.values()))["recall"])
    lines = [stamp_line(data["machine"]), "", "数据从哪来（两套都没有参与任何选择，只用来量）：", ""]
    lines += [_source(name, source) for name, source in data["sources"].items()]
    timing = "，".join(f"{kind} {ms:.0f} ms" for kind, ms in data["embed_ms"].items())
    lines += ["", f"嵌入：`{data['embedder']}`，共 {data['vectors']} 条向量（这次新算 {data['embedded']} 条，"
                  f"其余来自缓存）。每条要多久（从各类里各取几十条不经缓存重算；看测量戳上的 load）：{timing}。", ""]
    sizes = "；".join(f"{SET_NAMES.get(n, n)} {_scope(sets[n])}{sets[n]['queries']} 题、{sets[n]['documents']} 段"
                     for n in names)
    lines += [f"每套多大：{sizes}。", "", _row(["配置", "由哪套数据定的"]), _row(["---", "---"])]
    lines += [_row([c, CHOSEN_BY[c]]) for c in configs if c in CHOSEN_BY]
    lines.append(_row(["其余各行（候选）", "两路等权，没有拟合；默认就是其中的「mix·等权·保留1」"]))
    lines.append("")
    for measure, meaning in MEASURES.items():
        lines += [f"recall@{data['top_k']}，{meaning}：", "", _row(["配置", *(SHORT_NAMES.get(n, n) for n in names)]),
                  _row(["---"] * (len(names) + 1))]
        for config in configs:
            cells = [f"{sets[n]['recall'][config][measure]:.3f}" for n in names]
            lines.append(_row([f"**{config}**" if config == "默认" else config, *cells]))
        lines.append("")
    for measure in MEASURES:
        checks = verdicts(data, measure)
        above = [SET_NAMES.get(n, n) for n, (ok, _) in checks.items() if not ok]
        below = [SET_NAMES.get(n, n) for n, (_, ok) in checks.items() if not ok]
        missed = "**没做到**的有 "
        lines.append(f"按「{'至少一条' if measure == 'hit' else '相关条目的比例'}」算：默认比只用关键词高 {MARGIN}"
                     " 以上：" + ("每一套都做到；" if not above else missed + "、".join(above) + "；")
                     + "不低于只用 e5：" + ("每一套都做到。" if not below else missed + "、".join(below) + "。"))
    return "\n".join(lines) + "\n"
