"""Steps of the lore layer (issue 23): import a card, play with activation, look at a turn with lore.

Invariant: these steps go through the app's objects. ``import_card`` is
:meth:`liyuan.Card.import_card` on the scenario's card; ``lore_play`` plays turns through
:class:`liyuan.Chat` (``prepare`` activates the card's lore book, ``record`` runs the
compaction check), and ``lore_turn`` is :meth:`liyuan.Chat.preview`: the activation log,
the tail and the turn record are the ones an app gets.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from liyuan.app import Turn
from liyuan.config import MemoryConfig
from liyuan.errors import ConfigError
from liyuan.lore import LORE_FILE, LoreBook, LoreReport
from liyuan.lore.activate import lore_share_chars
from liyuan.lore.model import substitute_macros

from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from .common import context_label, prompt_label, prompt_text
from .story_steps import compactions_since, keep_turn, play_turn, record_table, render_messages, turns_to_play

__all__ = ["report_text"]


def _told(run: ScenarioRun, chat_id: str, turns: list[Turn], how: str, turn: Turn) -> None:
    keep_turn(run, chat_id, how, turn)
    turns.append(turn)


def _book(run: ScenarioRun) -> LoreBook:
    book = run.card.lore
    if book is None:
        raise ConfigError(f"{run.scenario.card} 还没有设定集：先用 import_card 步骤导入角色卡")
    return book


def report_text(report: LoreReport, book: LoreBook, tail: str, config: MemoryConfig,
                names: tuple[str, str] = ("", "")) -> str:
    """The lore part of a turn's record, as a person reads it (``names``: user, character)."""
    lines = [f"份额：{report.share_chars} 字（budget_chars {config.budget_chars} × lore_share {config.lore_share:g}）",
             f"设定集共 {report.entries} 条；激活 {len(report.activated)} 条，按放入的顺序："]
    included = set(report.included)
    cut = {c.title: c for c in report.cut}
    for number, hit in enumerate(report.activated, start=1):
        fate = "放进【相关设定】" if hit.title in included else \
            f"截掉（{cut[hit.title].chars} 字，份额只剩 {cut[hit.title].left} 字；标题列进索引）" \
            if hit.title in cut else "正文为空，不占地方"
        lines.append(f"{number}. {hit.title} · {hit.why} · {fate}")
    lines.append(f"【相关设定】{report.text_chars} 字；【设定集索引】列 {report.index_titles} 条标题 "
                 f"{report.index_chars} 字；索引放不下的 {report.index_left_out} 条")
    user, char = names
    by_title = {substitute_macros(entry.title, char, user): entry for entry in book.entries}
    verbatim = all(substitute_macros(by_title[title].content, char, user).strip() in tail for title in report.included)
    same = "一字不差" if verbatim else "不同"
    lines.append(f"逐字核对：放进【相关设定】的 {len(report.included)} 条正文和 {LORE_FILE} 里"
                 f"（{{{{char}}}}、{{{{user}}}} 换成名字）{same}")
    lines += ["", "活动行（Activity kind=lore）："] + [f"- {line}" for line in report.lines()]
    return "\n".join(lines)


@handler("import_card")
def import_card(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Import a card file into the scenario's card: :meth:`liyuan.Card.import_card`."""
    if run.root is None:
        raise ConfigError(f"{step.id}: 不知道仓库根目录，找不到 {step.params['file']}")
    card = run.card
    imported = card.import_card(run.root / step.params["file"])
    greetings = card.greetings()
    book = imported.book
    entries = len(book.entries) if book else 0
    book_text = (run.card.path / LORE_FILE).read_text(encoding="utf-8") if book else ""
    run.write_txt("book", book_text)
    scan = f"扫描 {book.scan_turns} 轮，递归 {book.recursion_steps} 步" if book else "没有"
    card_lines = [f"格式：{imported.kind}（{imported.container}）", f"角色：{imported.name}",
                  f"设定集：{entries} 条，{scan}",
                  "开场白（{{char}}、{{user}} 已替换）："] + [f"- {g}" for g in greetings]
    kept = sorted(k for k in imported.data.get("data", {}) if k not in ("name", "first_mes", "character_book"))
    card_lines.append(f"原样保留在 角色卡.json 的其余字段：{'、'.join(kept)}")
    card_lines += ["导入报告（每个字段一行：照做、近似、保留未照做、不适用）："] + \
        [f"- {line}" for line in imported.report_summary()]
    run.write_txt("card", "\n".join(card_lines))
    return StepResult({"kind": imported.kind, "container": imported.container, "name": imported.name,
                       "entries": entries, "greetings": len(greetings)},
                      f"导入 {imported.kind}：{imported.name}，设定 {entries} 条")


@handler("lore_play")
def lore_play(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Play turns through the chat; log what each turn's ``prepare`` activated."""
    chat_id, chat, spec, turns, start, stop = turns_to_play(run, step)
    log: list[str] = []
    compactions: list[dict[str, Any]] = []
    summaries: list[str] = []
    activations: list[dict[str, Any]] = []
    for number in range(start + 1, stop + 1):
        seen = len(run.events)
        prepared: list[Turn] = []
        play_turn(chat, turns[number - 1], mode=spec.mode, on_turn=partial(_told, run, chat_id, prepared))
        run.played[chat_id] = number
        report = prepared[-1].lore if prepared else None
        if report is not None:
            hits = "、".join(f"{hit.title}（{hit.why}）" for hit in report.activated if hit.why != "常驻")
            cut = f"；截掉 {len(report.cut)} 条" if report.cut else ""
            log.append(f"第 {number} 轮：{hits or '只有常驻条目'}；【相关设定】{len(report.included)} 条 "
                       f"{report.text_chars} 字{cut}")
            activations.append({"turn": number, "activated": [hit.title for hit in report.activated],
                                "cut": [c.title for c in report.cut]})
        if run.recorder.fatal is not None:
            break
        for data, summary in compactions_since(run, seen):
            compactions.append({"after_turn": number, **data})
            if summary is not None:
                summaries.append(summary)
            log.append(f"第 {number} 轮后：{data['message']}（设定集不参与压缩，下一轮照样按原文激活）")
    calls = run.recorder.step_calls(step.id, "summary")
    for i, call in enumerate(calls, start=1):
        run.write_txt(f"prompt_{i}", prompt_text(call), header=prompt_label(run))
    for i, text in enumerate(summaries, start=1):
        run.write_txt(f"summary_{i}", text, header=run.header_for(calls))
    run.write_txt("log", "\n".join(log))
    failed = any(c["kind"] in ("failed", "stale") for c in compactions)
    return StepResult({"chat": chat_id, "turns_played": run.played[chat_id], "activations": activations,
                       "compactions": compactions}, f"{chat_id} 演到第 {run.played[chat_id]} 轮；压缩 "
                      f"{len(compactions)} 次", failed=failed)


@handler("lore_turn")
def lore_turn(run: ScenarioRun, step: StepSpec) -> StepResult:
    """The next turn with the card's lore book, as :meth:`liyuan.Chat.preview` assembles it (nothing written)."""
    chat_id = step.params["chat"]
    turn = run.chat(chat_id).preview(step.params["user"])
    keep_turn(run, chat_id, "preview", turn)
    report = turn.lore
    if report is None:
        raise ConfigError(f"{step.id}: 这一轮没有用到设定集（卡里没有设定集？）")
    run.write_txt("history", render_messages(turn.messages), header=context_label(run))
    run.write_txt("injection", turn.injection, header=context_label(run))
    names = (run.scenario.user, run.scenario.char)
    run.write_txt("report", report_text(report, _book(run), turn.injection, run.config, names))
    if turn.record is not None:
        run.write_txt("record", record_table(run.stable_chunks(turn.record.to_json())))
    share = lore_share_chars(run.config.budget_chars, run.config.lore_share)
    outcome = {"summary_message": turn.summary is not None, "share_chars": share, "lore": report.to_dict(),
               "activity": report.lines()}
    return StepResult(outcome, f"激活 {len(report.activated)} 条，放进 {len(report.included)} 条，"
                               f"截掉 {len(report.cut)} 条")
