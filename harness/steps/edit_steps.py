"""Steps that change an earlier turn in place: ``chat.edit`` and ``chat.delete`` (issue 38).

The turn's reply is edited or deleted through the app's :class:`liyuan.Chat`; the step
shows the old and new text, the summaries the change made stale (they covered the reply
and are never replayed again) next to the summaries the rewrite landed, and the rewrite's
prompts. The next turn's context is an ``assemble`` step after it.
"""

from __future__ import annotations

from typing import Any

from liyuan.errors import ConfigError
from liyuan.session.entries import Entry, is_message
from liyuan.story.view import story_view

from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from .common import prompt_label, prompt_text
from .story_steps import compactions_since

__all__: list[str] = []


def _summaries(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if e.type == "custom" and e.custom_type == "rp-summary"]


def _change(run: ScenarioRun, step: StepSpec, text: str | None) -> StepResult:
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    number = step.params["turn"]
    branch = chat.branch()
    view = story_view(branch)
    users = [i for i, e in enumerate(view) if is_message(e, "user")]
    if not 1 <= number <= len(users):
        raise ConfigError(f"{step.id}: 没有第 {number} 轮（当前分支共 {len(users)} 轮）")
    end = users[number] if number < len(users) else len(view)
    reply = next((e for e in view[users[number - 1]:end] if is_message(e, "assistant")), None)
    if reply is None:
        raise ConfigError(f"{step.id}: 第 {number} 轮没有回复可改")
    where = {e.id: i for i, e in enumerate(branch)}
    at = where[reply.id]
    before = _summaries(list(chat.tree))
    stale = [s for s in _summaries(list(branch)) if where.get(s.data["coversThroughId"], -1) >= at]
    seen = len(run.events)
    change = chat.edit(reply.id, text) if text is not None else chat.delete(reply.id)
    rewritten = _summaries(list(chat.tree))[len(before):]
    lines = [f"===== 第 {number} 轮的回复（{reply.id}）：改动前 =====", reply.text.strip(), "",
             f"===== 改动（{change.id}，{change.custom_type}）=====",
             text.strip() if text is not None else "（整条删掉：剧情里不再有这条回复，原文留在会话文件里）"]
    for s in stale:
        lines += ["", f"===== 作废的摘要 {s.id}（盖到 {s.data['coversThroughId']}，不再放进【前情提要】）=====",
                  s.data["summary"].strip()]
    for s in rewritten:
        until = s.data.get("rewriteUntil")
        tail = f"，重写还要盖到 {until}" if until else "，重写完成"
        head = f"===== 重写落下的摘要 {s.id}（{s.data['turns']} 轮，盖到 {s.data['coversThroughId']}{tail}）====="
        lines += ["", head, s.data["summary"].strip()]
    run.write_txt("change", "\n".join(lines))
    calls = run.recorder.step_calls(step.id, "summary")
    for i, call in enumerate(calls[:3], start=1):
        run.write_txt(f"prompt_{i}", prompt_text(call), header=prompt_label(run))
    compactions = [data for data, _summary in compactions_since(run, seen)]
    outcome: dict[str, Any] = {"chat": chat_id, "turn": number, "target": reply.id, "change": change.id,
                               "kind": change.custom_type, "stale": [s.id for s in stale],
                               "rewritten": [s.id for s in rewritten], "compactions": compactions}
    what = "改了" if text is not None else "删了"
    return StepResult(outcome, f"{what}第 {number} 轮的回复：{len(stale)} 份摘要作废，重写落下 {len(rewritten)} 份")


@handler("edit_turn")
def edit_turn(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Edit turn N's reply in place: :meth:`liyuan.Chat.edit`."""
    return _change(run, step, step.params["text"])


@handler("delete_turn")
def delete_turn(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Delete turn N's reply in place: :meth:`liyuan.Chat.delete`."""
    return _change(run, step, None)
