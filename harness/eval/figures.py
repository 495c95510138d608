"""Markdown of the measurement snapshots the site quotes: the long-chat series, the two
storage backends side by side, and the recall latency.

Each renderer is a pure function of the snapshot's JSON: the stamp line first
(:func:`harness.bench.stamp.stamp_line`), then the tables, then one verdict per target,
computed from the numbers (a missed target says so; nothing here is typed by hand).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from liyuan import MemoryConfig

from ..bench.methods import DEFAULT_METHOD
from ..bench.stamp import stamp_line

__all__ = ["context_markdown", "fusion_markdown", "latency_markdown", "long_markdown", "recall_markdown",
           "stores_markdown"]

PERIOD = MemoryConfig().every_n_turns
"""The compaction period the back-to-back chats use (the default): how far behind the relay may be."""

_TURN_LABELS = {"向量关·账本无": "向量关、无账本", "向量开·账本无": "向量开、无账本",
                "向量关·账本有": "向量关、有账本", "向量开·账本有": "向量开、有账本"}


def _met(ok: bool) -> str:
    return "达到" if ok else "**没达到**"


def _n(size: str | int) -> str:
    return f"{int(size):,}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def long_markdown(data: Mapping[str, Any]) -> str:
    """The long-chat series (:mod:`harness.bench.long`): per turn, cold open, recall at the cap, sync."""
    sizes = [str(s) for s in data["sizes"]]
    first, last = sizes[0], sizes[-1]
    lines = [stamp_line(data["machine"]), ""]
    first_cell = next(cell for row in data["turns"].values() for cell in row.values())
    repeat = len(first_cell.get("runs", ()))  # snapshots before the runs were kept: one run
    runs = f"，每种组合开 {repeat} 次、取各次中位数和 p95 的中位数" if repeat > 1 else ""
    lines += [f"每轮前台用时（`prepare` + `record`，每个规模计 {data['timed_turns']} 轮{runs}）：", "",
              _row(["每轮", *(f"{_n(s)} 轮" for s in sizes), f"{_n(last)} / {_n(first)}"]),
              _row(["---"] * (len(sizes) + 2))]
    worst_p50 = worst_p95 = 0.0
    for key, row in data["turns"].items():
        label = _TURN_LABELS.get(key, key)
        for stat in ("p50", "p95"):
            values = [row[s][f"{stat}_ms"] for s in sizes]
            ratio = values[-1] / values[0] if values[0] else float("inf")
            if stat == "p50":
                worst_p50 = max(worst_p50, ratio)
            else:
                worst_p95 = max(worst_p95, ratio)
            lines.append(_row([f"{label} {stat}", *(f"{v:.2f} ms" for v in values), f"{ratio:.2f}×"]))
    lines += ["", "冷启动（新进程，打开到第一次 `prepare()` 返回；每个规模开几次取中位数，括号里是每一次）：", "",
              _row(["冷启动", *(f"{_n(s)} 轮" for s in sizes)]), _row(["---"] * (len(sizes) + 1))]
    opens = data["open"]
    for key, row in opens.items():
        lines.append(_row([f"{key}：秒", *(f"{row[s]['open_s']:.2f}（" + " / ".join(
            f"{t:.2f}" for t in row[s].get("open_s_runs", [row[s]["open_s"]])) + "）" for s in sizes)]))
        lines.append(_row([f"{key}：内存增量 / 会话文件", *(
            f"{row[s]['peak_mb'] - row[s]['base_mb']:.1f} / {row[s]['file_mb']:.1f} MB" for s in sizes)]))
        if key == "向量开":  # with vector memory off there is nothing to recall
            lines.append(_row([f"{key}：第一次召回的条数", *(str(row[s]["first_recall_hits"]) for s in sizes)]))
    cap, sync = data["recall_at_cap"], data["sync"]
    lines += ["", f"满库召回（{cap['chunks']:,} 段，新进程）：打开到第一次 `prepare()` {cap['open_s']:.2f} 秒，"
                  f"第一次召回 {cap['first_recall_hits']} 条；关键词索引在后台 {cap['ready_s']:.1f} 秒载完，之后热召回 "
                  f"p50 {cap['recall_p50_ms']:.1f} ms、p95 {cap['recall_p95_ms']:.1f} ms。",
              "", "无事可做的同步（中位数）：" + "，".join(f"{_n(c)} 局 {v['p50_ms']:.1f} ms" for c, v in sync.items())
              + "。", ""]
    loops = data.get("back_to_back", [])
    if loops:
        side = loops[0]["side_ms"]
        lines += [f"连着走的轮次（旁路模型每次 {side:g} ms，是脚本摘要，不是模型输出；用户等的是 `prepare` + `record`，"
                  "两轮之间的空档代表扮演模型写回复的时间，不计时）：", "",
                  _row(["局长", "再走", "两轮之间", "p50", "p95", "最慢", "落下的摘要（丢弃）",
                        "一轮一轮等着压时的摘要"]),
                  _row(["---"] * 8)]
        for row in loops:
            bg, inline = row["background"], row["inline"]
            lines.append(_row([f"{_n(row['turns'])} 轮", f"{_n(row['played_turns'])} 轮", f"{row['gap_ms']:g} ms",
                               f"{bg['p50_ms']:.2f} ms", f"{bg['p95_ms']:.2f} ms", f"{bg['max_ms']:.1f} ms",
                               f"{bg['summaries']}（{bg['dropped']}）", str(inline["summaries"])]))
        lines.append("")
    lines += ["目标和结果（由上面的数算出）：", ""]
    lines.append(f"- 每轮 p50：{_n(last)} 轮不超过 {_n(first)} 轮的 1.5 倍（每种组合都算）："
                 f"{_met(worst_p50 <= 1.5)}，最差 {worst_p50:.2f}×；p95 不超过 2 倍：{_met(worst_p95 <= 2)}，"
                 f"最差 {worst_p95:.2f}×。")
    for key, row in opens.items():
        big = row[last]
        grown = big["peak_mb"] - big["base_mb"]
        lines.append(f"- {key}，{_n(last)} 轮打开不到 1.5 秒：{_met(big['open_s'] < 1.5)}（{big['open_s']:.2f} 秒）；"
                     f"内存增量不到文件的 1.5 倍：{_met(grown < 1.5 * big['file_mb'])}"
                     f"（{grown:.0f} MB 对 {big['file_mb']:.0f} MB）。")
    for row in loops:
        bg, inline = row["background"], row["inline"]
        ratio = bg["p95_ms"] / bg["p50_ms"] if bg["p50_ms"] else float("inf")
        lines.append(f"- 连着走（{_n(row['turns'])} 轮的局再走 {_n(row['played_turns'])} 轮，"
                     f"两轮之间 {row['gap_ms']:g} ms）："
                     f"p95 不超过 p50 的 2 倍：{_met(ratio <= 2)}（{ratio:.2f}×）；"
                     "落下的摘要和一轮一轮等着压时一样多："
                     f"{_met(bg['summaries'] == inline['summaries'])}"
                     f"（{bg['summaries']} 对 {inline['summaries']} 份）"
                     + (f"；摘要接力到的轮次不比一轮一轮等着压时少一个周期（{PERIOD} 轮）以上："
                        f"{_met(bg['covered_turns'] > inline['covered_turns'] - PERIOD)}"
                        f"（第 {_n(bg['covered_turns'])} 轮对第 {_n(inline['covered_turns'])} 轮）"
                        if "covered_turns" in bg else "") + "。")
    lines.append(f"- 满库热召回 p95 不到 100 ms 且第一次召回就有结果："
                 f"{_met(cap['recall_p95_ms'] < 100 and cap['first_recall_hits'] > 0)}。")
    if "500" in sync:
        lines.append(f"- 500 局的无事同步不到 300 ms：{_met(sync['500']['p50_ms'] < 300)}。")
    return "\n".join(lines) + "\n"


_STORE_ROWS = (
    ("recall_p50_ms", "召回 p50（排序都在梨园里做）", "ms"),
    ("recall_p95_ms", "召回 p95", "ms"),
    ("after_write_p50_ms", "写入一段后马上召回 p50", "ms"),
    ("after_write_p95_ms", "写入一段后马上召回 p95", "ms"),
    ("single_add_p50_ms", "单段写入 p50", "ms"),
    ("cold_snapshot_ms", "冷启动快照（五次中位）", "ms"),
    ("batch_chunks_per_s", "成批写入（段/秒）", ""),
)
_STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "files": "卡目录"}


def stores_markdown(data: Mapping[str, Any]) -> str:
    """The two backends side by side (:mod:`harness.bench.stores`, :mod:`harness.bench.session_backends`)."""
    lines = [stamp_line(data["machine"]), ""]
    sessions = data.get("sessions")
    if sessions:
        backends = sessions["backends"]
        names = [_STORE_NAMES.get(b, b) for b in backends]
        lines += [_row([f"整张卡：一局 {sessions['turns_in_chat']:,} 轮，每轮 prepare + record"
                        f"（带账本，计 {sessions['timed_turns']} 轮）", *names]), _row(["---"] * (len(names) + 1))]
        for key, label, unit in (("open_s", "打开到第一次 `prepare()`", "s"), ("turn_p50_ms", "每轮 p50", "ms"),
                                 ("turn_p95_ms", "每轮 p95", "ms")):
            lines.append(_row([label, *(f"{d[key]:.3f} {unit}" if unit == "s" else f"{d[key]:.2f} {unit}"
                                        for d in backends.values())]))
        lines.append("")
    backends = data["backends"]
    names = [_STORE_NAMES.get(b, b) for b in backends]
    lines += [_row([f"向量记忆：一局 {data['chunks']:,} 段、{data['dim']} 维", *names]),
              _row(["---"] * (len(names) + 1))]
    for key, label, unit in _STORE_ROWS:
        lines.append(_row([label, *(f"{d[key]:,.2f} {unit}".strip() if unit else f"{d[key]:,.0f}"
                                    for d in backends.values())]))
    lines += ["", "目标和结果（由上面的数算出）：", ""]
    if sessions and "postgres" in sessions["backends"]:
        ratio = sessions["backends"]["postgres"]["turn_p50_ms"] / sessions["backends"]["files"]["turn_p50_ms"]
        lines.append(f"- PostgreSQL 上每轮不超过卡目录的 2 倍：{_met(ratio <= 2)}（{ratio:.2f}×）。")
    if "postgres" in backends:
        p95 = backends["postgres"]["recall_p95_ms"]
        lines.append(f"- PostgreSQL 召回 p95 不超过 50 ms：{_met(p95 <= 50)}（{p95:.2f} ms）。")
    else:
        lines.append(f"- 这次没有 PostgreSQL：{data['notes'].get('postgres', '')}")
    return "\n".join(lines) + "\n"


def latency_markdown(data: Mapping[str, Any]) -> str:
    """The recall latency on the full path (:mod:`harness.bench.latency`): idle and busy, and during a compaction."""
    lines = [stamp_line(data["machine"]), "",
             f"召回延迟（`recall_for_turn` 全路径，{data['rounds']} 次查询；「忙」是旁边另跑一个占满一核的进程）：", "",
             _row(["方法", "段数", "负载", "一分钟 load", "冷启动", "p50", "p95", "写入后"]), _row(["---"] * 8)]
    for row in data["rows"]:
        cold = f"{row['cold_ms']:.0f} ms" + ("（超时）" if row["cold_timed_out"] else "")
        lines.append(_row([f"`{row['method']}`", f"{row['chunks']:,}", "忙" if row["load"] == "busy" else "空闲",
                           f"{row['loadavg']:.2f}", cold, f"{row['p50_ms']:.1f} ms", f"{row['p95_ms']:.1f} ms",
                           f"{row['after_write_ms']:.1f} ms"]))
    cases = data.get("compaction", [])
    if cases:
        lines += ["", "压缩归档的同时召回（归档开始嵌入后马上发起下一轮召回）：", "",
                  _row(["负载", "一分钟 load", "归档段数", "归档用时", "下一轮召回", "召回行数"]), _row(["---"] * 6)]
        for case in cases:
            lines.append(_row(["忙" if case["load"] == "busy" else "空闲", f"{case['loadavg']:.2f}",
                               str(case["archived_chunks"]), f"{case['archive_s']} s", f"{case['recall_ms']:.0f} ms",
                               str(case["recall_lines"])]))
    lines += ["", "目标和结果（由上面的数算出）：", ""]
    for load, limit in (("idle", 50), ("busy", 500)):
        rows = [r for r in data["rows"] if r["chunks"] == 5000 and r["load"] == load and r["method"] == DEFAULT_METHOD]
        for row in rows[:1]:
            shown = "空闲" if load == "idle" else "忙"
            lines.append(f"- `{row['method']}` 5,000 段{shown}时 p95 不超过 {limit} ms："
                         f"{_met(row['p95_ms'] <= limit)}（{row['p95_ms']:.1f} ms）。")
    for case in cases:
        shown = "忙" if case["load"] == "busy" else "空闲"
        lines.append(f"- 压缩归档时（{shown}）下一轮召回在 5 秒内拿到结果：{_met(case['within_bound'])}。")
    return "\n".join(lines) + "\n"


_SET_NAMES = {"labelled": "标注题", "heldout": "留出题"}
_RECALL_COLUMNS = (("hybrid-e5", "默认（e5 混合）"), ("lexical", "只用关键词"), ("e5", "只用 e5"),
                   ("hybrid", "USE 混合"), ("hybrid-hash", "哈希混合"))


def recall_markdown(data: Mapping[str, Any]) -> str:
    """recall@k of the main methods on every hand-written set (:func:`harness.bench.recall_table`).

    Deterministic for a given code and model; stamped all the same, so a reader sees which
    commit chose the numbers.
    """
    from ..bench.methods import LANGUAGE_NAMES

    shown = [(key, label) for key, label in _RECALL_COLUMNS
             if any(key in lang["methods"] for lang in data["languages"].values())]
    top = data["top_k"]
    lines = [stamp_line(data["machine"]), "", f"recall@{top}（前 {top} 条里有答案的题占几成）：", "",
             _row(["题集", "题数", *(label for _key, label in shown), "默认 − 关键词"]),
             _row(["---"] * (len(shown) + 3))]
    below = []
    for language, lang in data["languages"].items():
        for set_name, count in lang["queries"].items():
            cells = []
            for key, _label in shown:
                result = lang["methods"].get(key, {}).get(set_name)
                cells.append("—" if result is None else f"{result['recall_at_5']:.3f}")
            default = lang["methods"].get("hybrid-e5", {}).get(set_name)
            keyword = lang["methods"].get("lexical", {}).get(set_name)
            gap = "—"
            if default is not None and keyword is not None:
                delta = default["recall_at_5"] - keyword["recall_at_5"]
                gap = f"{delta:+.3f}"
                if delta < 0.02:
                    below.append(f"{LANGUAGE_NAMES.get(language, language)}{_SET_NAMES.get(set_name, set_name)}")
            lines.append(_row([f"{LANGUAGE_NAMES.get(language, language)} {_SET_NAMES.get(set_name, set_name)}",
                               str(count), *cells, gap]))
    lines += ["", "默认配置比只用关键词高 0.02 以上：" + ("每一套都达到。" if not below else
                                                  "**没达到**的有 " + "、".join(below) + "。")]
    return "\n".join(lines) + "\n"


def fusion_markdown(data: Mapping[str, Any]) -> str:
    """How the default fusion was chosen (:mod:`harness.bench.fusion`): recall@k of every
    candidate on every set (one row per candidate, so the table stays narrow), the candidate
    each leave-one-set-out fold chose, and the default."""
    from ..bench.methods import LANGUAGE_NAMES

    sets = data["sets"]
    languages = list(sets)
    names = list(next(iter(sets.values())))
    top = data["top_k"]
    heads = [f"{LANGUAGE_NAMES.get(lang, lang)}（{next(iter(sets[lang].values()))[1]} 题）" for lang in languages]
    lines = [stamp_line(data["machine"]), "", f"recall@{top}（标注题和留出题合在一起）：", "",
             _row(["候选", *heads]), _row(["---"] * (len(languages) + 1))]
    for name in names:
        lines.append(_row([name, *(f"{sets[lang][name][0] / sets[lang][name][1]:.3f}" for lang in languages)]))
    chosen = [data["folds"][lang] for lang in languages]
    lines.append(_row(["**留出这一套时，另外三套挑中的**",
                       *(f"{c}（{sets[lang][c][0] / sets[lang][c][1]:.3f}）" for lang, c in zip(languages, chosen,
                                                                                          strict=True))]))
    default = data["chosen"]
    below = [LANGUAGE_NAMES.get(lang, lang) for lang, row in sets.items()
             if row[default][0] < max(row["关键词"][0], row["e5"][0])]
    lines += ["", f"四套一起挑出的默认：「{default}」。不低于两路里较强的一路："
                  + ("每一套都做到。" if not below else "**没做到**的有 " + "、".join(below) + "。")]
    return "\n".join(lines) + "\n"


_STORAGE_LABELS = {"turn": "每轮一段", "turn+embed-context": "每轮一段，向量带上一轮",
                   "turn+overlap": "每轮一段，原文带上一轮", "archive": "归档拼段",
                   "archive+overlap": "归档拼段，重叠一轮（现在的归档）"}


def context_markdown(data: Mapping[str, Any]) -> str:
    """recall@k of the five ways of storing a chunk with its context (:mod:`harness.bench.context`):
    one row per way, one column per set, each cell the default / keyword only."""
    from ..bench.methods import DEFAULT_METHOD, LANGUAGE_NAMES

    stories = data["stories"]
    columns = [(lang, set_name) for lang, rows in stories.items()
               for set_name in next(iter(rows.values()))[DEFAULT_METHOD]]
    lines = [stamp_line(data["machine"]), "", f"recall@{data['top_k']}，每格是「默认配置 / 只用关键词」：", "",
             _row(["存法", *(f"{LANGUAGE_NAMES.get(lang, lang)}{_SET_NAMES.get(s, s)}" for lang, s in columns)]),
             _row(["---"] * (len(columns) + 1))]
    for storage in next(iter(stories.values())):
        cells = []
        for lang, set_name in columns:
            row = stories[lang][storage]
            cells.append(f"{row[DEFAULT_METHOD][set_name]['recall_at_5']:.3f} / "
                         f"{row['lexical'][set_name]['recall_at_5']:.3f}")
        lines.append(_row([_STORAGE_LABELS.get(storage, storage), *cells]))
    return "\n".join(lines) + "\n"
