"""Markdown tables for the 评测 page, made from the committed JSON results.

Invariant: pure functions from a result (scorecard, strategy report, bench snapshot) to
Markdown text; the same result always gives the same text. The page includes these
files with snippets, so every number it shows comes from a file in the repository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FACT_LEGEND", "NOT_APPLICABLE", "SCORECARD_LEGEND", "bench_markdown", "scorecard_markdown",
           "scorecard_rows", "strategies_markdown"]


NOT_APPLICABLE = "不适用"
"""What a check that had nothing to check shows: never a pass."""

SCORECARD_LEGEND = (
    "怎么读：「检查」一列是上面列出的七项，外加「拒收」（被记忆代码拒收的回复和原因）；"
    "「结果」一列里 `a/b` 是找到的 / 应该有的，每份产物各一个数，"
    "按写出的先后用「、」隔开（两份摘要就是两个数）；被记忆代码拒收的回复不算落地，事实召回按 0 计，并写明原因；"
    f"大半是照抄 prompt 的回复，去掉照抄的行再算；「{NOT_APPLICABLE}」是这次运行里没有可查的东西，不算通过。"
)

FACT_LEGEND = (
    "每行一条金标事实；「摘要」「复盘」「手册」「常驻摘要」四列各是这类产物，一格里每个符号是一份产物，按写出的先后排："
    "✓ 记住了，✗ 该记住却没有，拒 是这份回复被拒收（按没记住算），"
    "— 是这份产物不考这条（没覆盖到那几轮，或不在那一局）。"
)

_CUTS = {"none": "整段送出", "paragraph": "截在段落边界", "line": "截在行尾", "hard": "硬截",
         "dropped": "整段不送", "mid-paragraph": "截在段落中间（违规）",
         "held": "扣下（这一局的改动还没合并）"}


def _landed(record: Mapping[str, Any]) -> bool:
    return bool(record.get("landed", True))


def _recall_cell(records: Sequence[Mapping[str, Any]], key: str) -> str:
    """``found/expected`` per artifact; a refused reply scores 0, a mostly-echo reply is marked."""
    parts = []
    for record in records:
        recall = record.get(key)
        if recall is None:
            continue
        found = len(recall["found"]) if _landed(record) else 0
        part = f"{found}/{recall['expected']}" if recall["expected"] else NOT_APPLICABLE
        if not _landed(record):
            part += "（拒收）"
        elif recall.get("echo", {}).get("mostly_echo"):
            part += "（去掉照抄）"
        parts.append(part)
    return "、".join(parts)


def _oks(records: Sequence[Mapping[str, Any]], key: str) -> str:
    judged = [r[key]["ok"] for r in records if key in r]
    return f"{sum(1 for ok in judged if ok)}/{len(judged)}" if judged else NOT_APPLICABLE


def _refusals(card: Mapping[str, Any]) -> list[str]:
    out = []
    for label, group in (("摘要", "summaries"), ("复盘", "recaps"), ("合并", "merges")):
        for record in card[group]:
            if not _landed(record):
                reason = record.get("refused") or "；".join(record["structure"].get("problems", [])[:1])
                out.append(f"{label}（{record['step']}）被拒收：{reason}")
    return out


def _budget_row(card: Mapping[str, Any]) -> tuple[str, str] | None:
    budget = [b for b in card["budget"] if b.get("ok") is not None]
    if not budget:
        return None
    judged = [b for b in budget if b["cut"] != "absent"]
    cuts: dict[str, int] = {}
    for b in judged:
        cuts[b["cut"]] = cuts.get(b["cut"], 0) + 1
    absent = len(budget) - len(judged)
    resident = "、".join(f"{_CUTS.get(k, k)} {v}" for k, v in sorted(cuts.items()))
    if absent:
        resident += ("；" if resident else "") + f"{absent} 个上下文里卡上还没有常驻摘要，截断规则{NOT_APPLICABLE}"
    return ("预算 4300 字", f"{sum(1 for b in budget if b['ok'])}/{len(budget)} 个上下文合规；常驻摘要：{resident}")


def _growth_text(growth: Mapping[str, Any]) -> str:
    lengths = " → ".join(str(n) for n in growth["summary_chars"])
    covered = " → ".join(str(n) for n in growth["covered_chars"])
    ratios = " → ".join(f"{c:.2f}" for c in growth["compression"])
    text = f"摘要 {lengths} 字，累计覆盖原文 {covered} 字；压缩比（摘要 ÷ 覆盖原文，越小压得越狠）{ratios}"
    if any(c > 1 for c in growth["compression"]):
        text += "。压缩比大于 1：摘要比它替掉的原文还长，覆盖的原文太短，五节格式本身的篇幅就超过了压掉的字数"
    if growth["snowball"]:
        text += "；越滚越大"
    return text


def scorecard_rows(card: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(check, result) rows of one scenario's scorecard, as the 评测 page shows them."""
    summaries, recaps, merges = card["summaries"], card["recaps"], card["merges"]
    rows: list[tuple[str, str]] = []
    parts = [f"{label} {_oks(records, key)}" for label, records, key in (
        ("摘要五节", summaries, "structure"), ("复盘", recaps, "structure"), ("合并两份", merges, "structure"),
        ("常驻摘要 ≤ 1200 字", merges, "resident")) if records]
    rows.append(("结构", " · ".join(parts) or f"{NOT_APPLICABLE}（没有摘要、复盘或合并）"))
    if card["gold"]["facts"]:
        recall = [f"{label} {_recall_cell(records, key)}" for label, records, key in (
            ("摘要", summaries, "recall"), ("复盘", recaps, "recall"), ("手册", merges, "recall_handbook"),
            ("常驻摘要", merges, "recall_resident")) if any(key in r for r in records)]
        rows.append(("事实召回", " · ".join(recall) or f"{NOT_APPLICABLE}（没有可查的产物）"))
    else:
        rows.append(("事实召回", f"{NOT_APPLICABLE}（这个场景没有金标事实）"))
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
                f"删了 {len(record['went'])} 条，精确率 {NOT_APPLICABLE if p is None else f'{p:.2f}'}，"
                f"召回率 {NOT_APPLICABLE if r is None else f'{r:.2f}'}")
        if record["stale_tags"]:
            text += f"；{len(record['stale_tags'])} 条还带着被删局的标记"
        rows.append((f"按来源遗忘（{'手册' if record['file'] == 'handbook' else '常驻摘要'}）", text))
    budget = _budget_row(card)
    if budget is not None:
        rows.append(budget)
    for chat, growth in card["growth"].items():
        rows.append((f"增长（局 {chat}）", _growth_text(growth)))
    refusals = _refusals(card)
    if refusals:
        rows.append(("拒收", "；".join(refusals)))
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
                if not _landed(record):
                    marks.append("拒")
                else:
                    marks.append("✓" if fact["id"] in recall["found"] else "✗")
            cells.append(" ".join(marks) or "—")
        lines.append(f"| {fact['text']} | " + " | ".join(cells) + " |")
    return lines


def scorecard_markdown(runs: Sequence[tuple[str, Mapping[str, Any]]],
                       gold_facts: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """One section per run: provenance, a check table per scenario, a per-fact table.

    Every table is followed by its legend, so no mark or number is left unexplained.

    Args:
        runs: (path of the eval.json, scorecard) in display order.
        gold_facts: Scenario -> its facts (``id``, ``text``) for the per-fact tables.
    """
    out: list[str] = [SCORECARD_LEGEND, ""]
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
                out.append(f'??? note "逐条事实（{name}，{len(facts)} 条）"')
                out.append("")
                out.append("    " + FACT_LEGEND)
                out.append("")
                out.extend("    " + line for line in _fact_table(scenario, facts))
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def strategies_markdown(report: Mapping[str, Any]) -> str:
    """The strategy comparison as three narrow tables (sizes, compactions, facts), each with its legend.

    Three tables of four or five columns instead of one of eight: each fits the page's
    column on a laptop and on a phone, so no column hides behind a sideways scroll.
    """
    settings, chat = report["settings"], report["chat"]
    window = settings["window_tokens"]
    runs = report["strategies"]
    sizes = ["**上下文多大**", "",
             f"| 策略 | 最大（字 / token） | 最后一轮（字 / token） | 超出 {window // 1024}k 窗口的轮数 |",
             "|---|--:|--:|--:|"]
    sizes += [f"| {r['label']} | {r['max_chars']:,} / {r['max_tokens']:,} | {r['final_chars']:,} / "
              f"{r['final_tokens']:,} | {r['turns_over_window']} |" for r in runs]
    sizes += ["", f"最大：{chat['turns']} 轮里送出最多的那一轮；最后一轮：第 {chat['turns']} 轮送出的上下文；"
              f"超出窗口：送出的上下文（估算 token）超过 {window:,} 的轮数。", ""]
    calls = ["**压了几次、切在哪**", "",
             "| 策略 | 旁路调用 | 压缩 | 切在两轮之间 | 切在一轮中间 |", "|---|--:|--:|--:|--:|"]
    for r in runs:
        between = "每轮滑动" if r["name"] == "truncate" else str(r["cuts_between_turns"])
        calls.append(f"| {r['label']} | {r['side_calls']} | {r['compactions']} | {between} | {r['cuts_inside_turn']} |")
    calls += ["", "旁路调用：为压缩请旁路模型的次数；压缩：压缩的次数；"
              "切在两轮之间 / 一轮中间：每次压缩的切点落在哪（一轮 = 一条用户消息和它的回复）。", ""]
    facts = [f"**{chat['facts']} 条埋下的事实，最后一轮在哪**", "",
             "| 策略 | 原文 | 账本 | 交给过摘要 | 丢了 |", "|---|--:|--:|--:|--:|"]
    for r in runs:
        f = r["facts"]
        facts.append(f"| {r['label']} | {f['verbatim']} | {f['ledger']} | {f['summarised']} | {f['lost']} |")
    facts += ["", "原文：还在保留的原文里；账本：原文不在了，【世界状态】里还记着；"
              "交给过摘要：原文不在了，但进过某次摘要请求；丢了：不在上下文里，也从没交给谁。"]
    return "\n".join(sizes + calls + facts) + "\n"


def bench_markdown(bench: Mapping[str, Any]) -> str:
    """The benchmark snapshot: machine, per-turn overhead, wall times."""
    from ..bench.stamp import stamp_line

    lines = [stamp_line(bench["machine"]), ""]
    overhead = bench.get("overhead")
    if overhead:
        names = {"library": "本库（分支有缓存，只读活跃区间）"}
        lines += [f"每轮开销（毫秒；每种长度取最后 {overhead['sample_turns']} 轮）", "",
                  "| 实现 | 对话长度（轮） | 中位数 | p95 |", "|---|---|---|---|"]
        lines += [f"| {names.get(r['variant'], r['variant'])} | {r['turns']:,} | {r['median_ms']:.3f} | "
                  f"{r['p95_ms']:.3f} |" for r in overhead["rows"]]
        lines.append("")
        for variant, verdict in overhead.get("verdicts", {}).items():
            lines.append(f"- {names.get(variant, variant)}：10,000 轮中位数 {verdict['median_10000_ms']:.3f} ms，"
                         f"是 100 轮的 {verdict['ratio_to_100']:.2f} 倍，"
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
