"""Markdown tables for the 评测 page, made from the committed JSON results.

Invariant: pure functions from a result (scorecard, strategy report, bench snapshot) to
Markdown text; the same result always gives the same text. The page includes these
files with snippets, so every number it shows comes from a file in the repository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bench_markdown", "scorecard_markdown", "scorecard_rows", "strategies_markdown"]


def _ratio(found: int, expected: int) -> str:
    return f"{found}/{expected}" if expected else "—"


def _sum_recall(records: Sequence[Mapping[str, Any]], key: str = "recall") -> tuple[int, int]:
    found = sum(len(r[key]["found"]) for r in records if key in r)
    expected = sum(r[key]["expected"] for r in records if key in r)
    return found, expected


def _oks(records: Sequence[Mapping[str, Any]], key: str) -> tuple[int, int]:
    judged = [r[key]["ok"] for r in records if key in r]
    return sum(1 for ok in judged if ok), len(judged)


def scorecard_rows(card: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(check, result) rows of one scenario's scorecard, as the 评测 page shows them."""
    summaries, recaps, merges = card["summaries"], card["recaps"], card["merges"]
    rows: list[tuple[str, str]] = []
    parts = [f"{label} {_ratio(*_oks(records, key))}" for label, records, key in (
        ("摘要五节", summaries, "structure"), ("复盘", recaps, "structure"), ("合并两份", merges, "structure"),
        ("常驻摘要 ≤ 1200 字", merges, "resident")) if records]
    rows.append(("结构", " · ".join(parts) or "—"))
    if card["gold"]["facts"]:
        recall = [f"{label} {_ratio(*_sum_recall(records, key))}" for label, records, key in (
            ("摘要", summaries, "recall"), ("复盘", recaps, "recall"), ("手册", merges, "recall_handbook"),
            ("常驻摘要", merges, "recall_resident")) if any(key in r for r in records)]
        rows.append(("事实召回", " · ".join(recall) or "—"))
    else:
        rows.append(("事实召回", "这个场景没有金标事实"))
    scenes = [r["latest_scene"] for r in summaries if "latest_scene" in r]
    if scenes:
        earlier = sum(1 for s in scenes if s["verdict"] == "earlier")
        rows.append(("最新场景", f"{sum(1 for s in scenes if s['ok'])}/{len(scenes)} 份摘要写的是最新场景"
                     + (f"（{earlier} 份退回了更早的场景）" if earlier else "")))
    if card["gold"]["never_said"]:
        violations = card["abstention"]["violations"]
        rows.append(("不编造", "没有出现从没说过的事" if not violations else
                     "出现了：" + "、".join(f"{v['fact']}（{v['artifact']}）" for v in violations)))
    for record in card["forgetting"]:
        p, r = record["precision"], record["recall"]
        text = (f"删掉 {'、'.join(record['deleted'])} 后：该删 {len(record['should_go'])} 条，"
                f"删了 {len(record['went'])} 条，精确率 {'—' if p is None else f'{p:.2f}'}，"
                f"召回率 {'—' if r is None else f'{r:.2f}'}")
        if record["stale_tags"]:
            text += f"；{len(record['stale_tags'])} 条还带着被删局的标记"
        rows.append((f"按来源遗忘（{'手册' if record['file'] == 'handbook' else '常驻摘要'}）", text))
    budget = [b for b in card["budget"] if b.get("ok") is not None]
    if budget:
        cuts: dict[str, int] = {}
        for b in budget:
            cuts[b["cut"]] = cuts.get(b["cut"], 0) + 1
        names = {"none": "整段送出", "paragraph": "截在段落边界", "line": "截在行尾", "hard": "硬截",
                 "dropped": "整段不送", "mid-paragraph": "截在段落中间（违规）"}
        rows.append(("预算 4300 字", f"{sum(1 for b in budget if b['ok'])}/{len(budget)} 个上下文合规；常驻摘要："
                     + "、".join(f"{names.get(k, k)} {v}" for k, v in sorted(cuts.items()))))
    for chat, growth in card["growth"].items():
        lengths = " → ".join(str(n) for n in growth["summary_chars"])
        ratios = " → ".join(f"{c:.2f}" for c in growth["compression"])
        rows.append((f"增长（局 {chat}）", f"摘要 {lengths} 字；压缩比（摘要 ÷ 覆盖原文）{ratios}"
                     + ("；越滚越大" if growth["snowball"] else "")))
    return rows


def _fact_table(card: Mapping[str, Any], facts: Sequence[Mapping[str, Any]]) -> list[str]:
    columns = [("摘要", "summaries", "recall"), ("复盘", "recaps", "recall"),
               ("手册", "merges", "recall_handbook"), ("常驻摘要", "merges", "recall_resident")]
    lines = ["| 事实 | " + " | ".join(c[0] for c in columns) + " |", "|---|" + "---|" * len(columns)]
    for fact in facts:
        cells = []
        for _label, group, key in columns:
            marks = []
            for record in card[group]:
                recall = record.get(key)
                if recall is None or fact["id"] not in (*recall["found"], *recall["missing"]):
                    continue
                marks.append("✓" if fact["id"] in recall["found"] else "✗")
            cells.append(" ".join(marks) or "—")
        lines.append(f"| {fact['text']} | " + " | ".join(cells) + " |")
    return lines


def scorecard_markdown(runs: Sequence[tuple[str, Mapping[str, Any]]],
                       gold_facts: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """One section per run: provenance, a check table per scenario, a per-fact table.

    Args:
        runs: (path of the eval.json, scorecard) in display order.
        gold_facts: Scenario -> its facts (``id``, ``text``) for the per-fact tables.
    """
    out: list[str] = []
    for path, card in runs:
        out.append(f"**{card['provenance']['label']}**（`{path}`）")
        out.append("")
        for name, scenario in card["scenarios"].items():
            out.append(f"场景 `{name}`（{'、'.join(f'`{f}`' for f in scenario['out_files'])}）")
            out.append("")
            out.append("| 检查 | 结果 |")
            out.append("|---|---|")
            out.extend(f"| {check} | {result} |" for check, result in scorecard_rows(scenario))
            out.append("")
            facts = gold_facts.get(name, ())
            if facts:
                out.append(f'??? note "逐条事实（{name}）：✓ 找到，✗ 缺失，— 不该出现在这里（没覆盖到或不在那一局）"')
                out.append("")
                out.extend("    " + line for line in _fact_table(scenario, facts))
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def strategies_markdown(report: Mapping[str, Any]) -> str:
    """The summary table of the strategy comparison."""
    settings, chat = report["settings"], report["chat"]
    window = settings["window_tokens"]
    lines = [
        f"| 策略 | 最大上下文 字 / token | 最后一拍 字 / token | 超出 {window // 1024}k 窗口的拍数 | 旁路调用 | "
        f"压缩 | 切点 轮间 / 轮内 | {chat['facts']} 条事实 原文 / 账本 / 交给过摘要 / 丢了 |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for run in report["strategies"]:
        facts = run["facts"]
        if run["name"] == "truncate":
            cuts = "每拍滑动 / 0"
        else:
            cuts = f"{run['cuts_between_turns']} / {run['cuts_inside_turn']}"
        lines.append(
            f"| {run['label']} | {run['max_chars']:,} / {run['max_tokens']:,} | {run['final_chars']:,} / "
            f"{run['final_tokens']:,} | {run['beats_over_window']} | {run['side_calls']} | {run['compactions']} | "
            f"{cuts} | {facts['verbatim']} / {facts['ledger']} / {facts['summarised']} / {facts['lost']} |")
    return "\n".join(lines) + "\n"


def bench_markdown(bench: Mapping[str, Any]) -> str:
    """The benchmark snapshot: machine, per-beat overhead, wall times."""
    machine = bench["machine"]
    lines = [f"测量于 {machine['measured_at']}，{machine['cpu']}（{machine['cores']} 核），"
             f"Python {machine['python']}，{machine['system']}。数字随机器而变，这是一份快照。", ""]
    overhead = bench.get("overhead")
    if overhead:
        names = {"library": "本库（分支有缓存，只读活跃区间）"}
        lines += [f"每拍开销（毫秒；每种长度取最后 {overhead['sample_beats']} 拍）", "",
                  "| 实现 | 对话长度（拍） | 中位数 | p95 |", "|---|---|---|---|"]
        lines += [f"| {names.get(r['variant'], r['variant'])} | {r['beats']:,} | {r['median_ms']:.3f} | "
                  f"{r['p95_ms']:.3f} |" for r in overhead["rows"]]
        lines.append("")
        for variant, verdict in overhead.get("verdicts", {}).items():
            lines.append(f"- {names.get(variant, variant)}：10,000 拍中位数 {verdict['median_10000_ms']:.3f} ms，"
                         f"是 100 拍的 {verdict['ratio_to_100']:.2f} 倍，"
                         f"{'达到' if verdict['meets_target'] else '没达到'}目标（{overhead['target']}）。")
        lines.append("")
    walls = bench.get("wall_times")
    if walls:
        lines += [f"整体用时（秒；跑 {walls['repeat']} 次）", "", "| 命令 | 最好 | 每次 |", "|---|---|---|"]
        for row in walls["rows"]:
            best = "失败" if row["best"] is None else f"{row['best']:.2f}"
            lines.append(f"| `{row['command']}` | {best} | {' / '.join(f'{s:.2f}' for s in row['seconds'])} |")
        lines.append("")
        for row in walls["rows"]:
            for tail in row.get("failures", [])[:1]:
                lines.append(f"- `{row['name']}` 失败：{' '.join(tail)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
