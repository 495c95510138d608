"""Steps of the pins (issue 38 item 4): pin a fact to one chat or to the whole card, and take it back.

Invariant: these steps go through the app's objects (:meth:`liyuan.Chat.pin`,
:meth:`liyuan.Card.pin` and their ``unpin``); the pins file they write is the one every
later turn reads, so an ``assemble`` step after them shows the pins as the model gets them.
"""

from __future__ import annotations

from liyuan.context.pins import Pin, pin_share_chars, pins_text
from liyuan.text import utf16_len

from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler

__all__: list[str] = []


def _listing(run: ScenarioRun, chat_id: str | None) -> tuple[str, list[dict[str, str]]]:
    pins: tuple[Pin, ...] = run.chat(chat_id).pins() if chat_id else run.card.pins()
    config = run.config
    share = pin_share_chars(config.budget_chars, config.pin_share, config.lore_share)
    where = f"局 {chat_id} 的每一轮" if chat_id else "整张卡每一局的每一轮"
    lines = [f"{where}带着的置顶（{utf16_len(pins_text(pins))} 字，份额 {share} 字 = budget_chars "
             f"{config.budget_chars} × pin_share {config.pin_share:g}）："]
    lines += [f"- {p.id}（{'整张卡' if p.scope == 'card' else '这一局'}）：{p.text}" for p in pins] or ["- 无"]
    return "\n".join(lines), [{"id": p.id, "scope": p.scope, "text": p.text} for p in pins]


@handler("pin")
def pin(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Pin a fact: :meth:`liyuan.Chat.pin` when the step names a chat, else :meth:`liyuan.Card.pin`."""
    chat_id = step.params.get("chat")
    made = run.chat(chat_id).pin(step.params["text"]) if chat_id else run.card.pin(step.params["text"])
    text, pins = _listing(run, chat_id)
    run.write_txt("pins", text)
    return StepResult({"id": made.id, "scope": made.scope, "chat": chat_id, "pins": pins},
                      f"置顶 {made.id}（{'局 ' + chat_id if chat_id else '整张卡'}）")


@handler("unpin")
def unpin(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Take a pin back: :meth:`liyuan.Chat.unpin` or :meth:`liyuan.Card.unpin`."""
    chat_id = step.params.get("chat")
    pin_id = step.params["pin"]
    removed = run.chat(chat_id).unpin(pin_id) if chat_id else run.card.unpin(pin_id)
    text, pins = _listing(run, chat_id)
    run.write_txt("pins", text)
    return StepResult({"id": pin_id, "removed": removed, "chat": chat_id, "pins": pins},
                      f"取消置顶 {pin_id}：{'已删' if removed else '没有这条'}")
