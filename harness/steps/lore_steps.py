"""Steps of the lore layer (issue 23): import a card, play with activation, assemble a turn with lore.

Invariant: these steps call the library as the app does. ``import_card`` is
:meth:`liyuan.Card.import_card` on the scenario's card folder; ``lore_play`` and
``lore_turn`` assemble each turn with :func:`liyuan.context.assemble.prepare_turn` and the
card's :class:`~liyuan.lore.LoreShelf` (what :meth:`liyuan.Chat.prepare` uses), so the
activation log, the tail and the turn record are those an app would get.
"""

from __future__ import annotations

from typing import Any

from liyuan import Card
from liyuan.config import MemoryConfig
from liyuan.context.assemble import PreparedTurn, prepare_turn
from liyuan.errors import ConfigError
from liyuan.lore import LORE_FILE, LoreIndex, LoreReport, LoreShelf, lore_share_chars
from liyuan.session.state import format_roster, format_state, state_from_branch
from liyuan.session.tree import SessionTree

from ..run_state import ScenarioRun, StepResult, handler
from ..scenario import StepSpec
from ..story import append_beat, chat_beats
from .common import context_label, prompt_label, prompt_text, resident_text
from .story_steps import _compaction, _outcome, render_messages

__all__ = ["report_text"]


def _index(run: ScenarioRun) -> LoreIndex:
    shelf = run.services.get("lore")
    if shelf is None:
        shelf = run.services["lore"] = LoreShelf(run.card_dir)
    index = shelf.index()
    if index is None:
        raise ConfigError(f"{run.scenario.card} 还没有设定集：先用 import_card 步骤导入角色卡")
    assert isinstance(index, LoreIndex)
    return index


def _turn(run: ScenarioRun, tree: SessionTree, user: str, *, resident: bool = True) -> PreparedTurn:
    ledger = state_from_branch(tree.branch())
    config = MemoryConfig()
    return prepare_turn(tree.branch(), user, resident_summary=resident_text(run) if resident else None,
                        state_text=format_state(ledger), roster=format_roster(ledger), lore=_index(run),
                        budget_chars=config.budget_chars, lore_share=config.lore_share)


def report_text(report: LoreReport, index: LoreIndex, tail: str) -> str:
    """The lore part of a turn's record, as a person reads it."""
    budget = MemoryConfig()
    lines = [f"份额：{report.share_chars} 字（budget_chars {budget.budget_chars} × lore_share {budget.lore_share:g}）",
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
    by_title = {entry.title: entry for entry in index.entries}
    verbatim = all(by_title[title].content.strip() in tail for title in report.included)
    same = "一字不差" if verbatim else "不同"
    lines.append(f"逐字核对：放进【相关设定】的 {len(report.included)} 条正文和 {LORE_FILE} 里{same}")
    lines += ["", "活动行（Activity kind=lore）："] + [f"- {line}" for line in report.lines()]
    return "\n".join(lines)


@handler("import_card")
def import_card(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Import a card file into the scenario's card folder, as :meth:`liyuan.Card.import_card` does."""
    if run.root is None:
        raise ConfigError(f"{step.id}: 不知道仓库根目录，找不到 {step.params['file']}")
    path = run.root / step.params["file"]
    with Card.open(run.card_dir, background=False, user_name=run.scenario.user) as card:
        imported = card.import_card(path)
        greetings = card.greetings()
    book = imported.book
    entries = len(book.entries) if book else 0
    book_text = (run.card_dir / LORE_FILE).read_text(encoding="utf-8") if book else ""
    run.write_txt("book", book_text)
    scan = f"扫描 {book.scan_turns} 轮，递归 {book.recursion_steps} 步" if book else "没有"
    card_lines = [f"格式：{imported.kind}（{imported.container}）", f"角色：{imported.name}",
                  f"设定集：{entries} 条，{scan}",
                  "开场白（{{char}}、{{user}} 已替换）："] + [f"- {g}" for g in greetings]
    kept = sorted(k for k in imported.data.get("data", {}) if k not in ("name", "first_mes", "character_book"))
    card_lines.append(f"原样保留在 角色卡.json 的其余字段：{'、'.join(kept)}")
    run.write_txt("card", "\n".join(card_lines))
    return StepResult({"kind": imported.kind, "container": imported.container, "name": imported.name,
                       "entries": entries, "greetings": len(greetings)},
                      f"导入 {imported.kind}：{imported.name}，设定 {entries} 条")


@handler("lore_play")
def lore_play(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Play beats; before each, activate lore for the user's words as the app's prepare does."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    beats = chat_beats(run.chat(chat_id))
    start = run.played[chat_id]
    stop = step.params.get("upto", len(beats))
    if not start <= stop <= len(beats):
        raise ConfigError(f"{step.id}: upto={stop} 超出了 {chat_id} 的轮数（已演 {start}，共 {len(beats)}）")
    log: list[str] = []
    compactions: list[dict[str, Any]] = []
    summaries: list[str] = []
    activations: list[dict[str, Any]] = []
    for number in range(start + 1, stop + 1):
        beat = beats[number - 1]
        turn = _turn(run, tree, beat.user, resident=False)
        report = turn.lore
        assert report is not None
        hits = "、".join(f"{hit.title}（{hit.why}）" for hit in report.activated if hit.why != "常驻")
        cut = f"；截掉 {len(report.cut)} 条" if report.cut else ""
        log.append(f"第 {number} 轮：{hits or '只有常驻条目'}；【相关设定】{len(report.included)} 条 "
                   f"{report.text_chars} 字{cut}")
        activations.append({"beat": number, "activated": [hit.title for hit in report.activated],
                            "cut": [c.title for c in report.cut]})
        append_beat(tree, beat)
        run.played[chat_id] = number
        if step.params.get("auto_compact", False):
            outcome = _compaction(run, tree, chat_id, manual=False, params={})
            if run.recorder.fatal is not None:
                break
            if outcome.kind != "skipped":
                compactions.append({"after_beat": number, **_outcome(outcome)})
                if outcome.summary is not None:
                    summaries.append(outcome.summary)
                log.append(f"第 {number} 轮后：{outcome.message}（设定集不参与压缩，下一轮照样按原文激活）")
    calls = run.recorder.step_calls(step.id, "summary")
    for i, call in enumerate(calls, start=1):
        run.write_txt(f"prompt_{i}", prompt_text(call), header=prompt_label(run))
    for i, text in enumerate(summaries, start=1):
        run.write_txt(f"summary_{i}", text, header=run.header_for(calls))
    run.write_txt("log", "\n".join(log))
    failed = any(c["kind"] in ("failed", "stale") for c in compactions)
    return StepResult({"chat": chat_id, "beats_played": run.played[chat_id], "activations": activations,
                       "compactions": compactions}, f"{chat_id} 演到第 {run.played[chat_id]} 轮；压缩 "
                      f"{len(compactions)} 次", failed=failed)


@handler("lore_turn")
def lore_turn(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Assemble a new turn with the card's lore book (the message is not persisted)."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    turn = _turn(run, tree, step.params["user"], resident=step.params.get("resident", True))
    report = turn.lore
    assert report is not None
    tail = turn.injection.render()
    run.write_txt("history", render_messages(turn.messages), header=context_label(run))
    run.write_txt("injection", tail, header=context_label(run))
    index = _index(run)
    run.write_txt("report", report_text(report, index, tail))
    share = lore_share_chars(MemoryConfig().budget_chars, MemoryConfig().lore_share)
    outcome = {"summary_message": turn.summary is not None, "share_chars": share, "lore": report.to_dict(),
               "activity": report.lines()}
    return StepResult(outcome, f"激活 {len(report.activated)} 条，放进 {len(report.included)} 条，"
                               f"截掉 {len(report.cut)} 条")
