"""Steps on the card's cross-session memory: sync, hand-written recap, deletions, budget fit.

Invariants: a sync is :meth:`liyuan.Card.sync` and deleting a chat
:meth:`liyuan.Card.delete_chat`, as the app calls them; writing or deleting a recap
file is the user's own edit in the memory folder (the seed's soft path, no library
call), at the path :attr:`liyuan.Card.memory` names. The ``fit`` step shows one layer
(:func:`liyuan.context.budget.fit_resident_summary`) on its own, and its scenario note
says so. Card memory runs on real files in the run's private work dir; artifacts get
only memory-relative paths and file contents (never mtimes, fingerprints or absolute
paths). A sync step records the memory files' hashes before and after, so "nothing
changed" is visible in the record, not just claimed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from liyuan.card.memstore import MemoryStore
from liyuan.card.sync import SyncOutcome
from liyuan.context.budget import (
    RESIDENT_ENVELOPE_CHARS,
    RESIDENT_MAX_CHARS,
    RESIDENT_MIN_USEFUL_CHARS,
    fit_resident_summary,
    resident_allowance,
)
from liyuan.errors import ConfigError

from ..running.recorder import CallRecord
from ..running.scenario import StepSpec
from ..running.state import HAND_WRITTEN_LINE, ScenarioRun, StepResult, handler
from .common import prompt_label, prompt_text

__all__ = ["HAND_WRITTEN_EDIT_LINE", "memory_snapshot"]

HAND_WRITTEN_EDIT_LINE = "（手改的记忆：人工撰写，演示在应用里手改记忆，不是模型输出）"

_CHAT_ATTR_RE = re.compile(r'<conversation\s+chat="([^"]*)"')


def memory_snapshot(files: MemoryStore) -> dict[str, str]:
    """Every memory document (relative path -> short sha256), hidden bookkeeping excluded."""
    return {rel: hashlib.sha256(data).hexdigest()[:12] for rel, data in files.snapshot().items()
            if not any(part.startswith(".") for part in rel.split("/"))}


def _recap_chat(run: ScenarioRun, call: CallRecord, candidates: list[str]) -> str | None:
    """Which chat a recap call was about: by the chat name the prompt quotes."""
    match = _CHAT_ATTR_RE.search(call.part("user"))
    if match:
        for chat_id in candidates:
            if run.chat_spec(chat_id).name == match.group(1) or chat_id == match.group(1):
                return chat_id
    return candidates[0] if len(candidates) == 1 else None


@handler("sync")
def sync(run: ScenarioRun, step: StepSpec) -> StepResult:
    """One card-memory sync, as the app runs it when a chat is entered or deleted."""
    run.name_chats()
    card = run.card
    memory = card.memory
    before = memory_snapshot(memory.files)
    outcome = card.sync() or SyncOutcome()
    after = memory_snapshot(memory.files)
    touched = list(outcome.recapped) + list(outcome.failed)
    recap_calls: dict[str, CallRecord] = {}
    for call in run.recorder.step_calls(step.id, "recap"):
        chat_id = _recap_chat(run, call, [c for c in touched if c not in recap_calls])
        if chat_id is not None:
            recap_calls[chat_id] = call
    for chat_id, call in recap_calls.items():
        run.write_txt(f"recap_prompt:{chat_id}", prompt_text(call), header=prompt_label(run))
        text = memory.files.read_text(memory.layout.recap_path(chat_id))
        if chat_id in outcome.recapped and text is not None:
            run.write_txt(f"recap:{chat_id}", text, header=run.header_for([call]))
    merge_calls = run.recorder.step_calls(step.id, "merge")
    if merge_calls:
        call = merge_calls[-1]
        run.write_txt("merge_prompt", prompt_text(call), header=prompt_label(run))
        user = call.part("user")
        run.write_txt("merge_prompt_user", user, header=prompt_label(run))
        tail_at = user.find("<deleted-chats>")
        if tail_at >= 0:
            run.write_txt("merge_prompt_tail", user[tail_at:], header=prompt_label(run))
        if outcome.merged == "ok":
            for key, path in (("handbook", memory.layout.handbook), ("resident", memory.layout.resident)):
                text = memory.files.read_text(path)
                if text is not None:
                    run.write_txt(key, text, header=run.header_for([call]))
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    resident = memory.load_resident_summary()
    record: dict[str, Any] = {
        "recapped": list(outcome.recapped),
        "failed": list(outcome.failed),
        "merged": outcome.merged,
        "forgotten": list(outcome.forgotten),
        "memory_files_before": before,
        "memory_files_after": after,
        "memory_files_changed": changed,
        "resident_chars": len(resident) if resident else 0,
        "resident_within_cap": len(resident) <= RESIDENT_MAX_CHARS if resident else True,
    }
    summary = (f"复盘 {len(outcome.recapped)} 局、失败 {len(outcome.failed)} 局；合并 {outcome.merged}；"
               f"遗忘 {len(outcome.forgotten)} 局；{len(changed)} 个记忆文件有变化")
    failed = bool(outcome.failed) or outcome.merged in ("failed", "skipped")
    return StepResult(record, summary, failed=failed)


@handler("write_recap")
def write_recap(run: ScenarioRun, step: StepSpec) -> StepResult:
    """A recap written by hand (labelled so everywhere), put where a model's recap would go."""
    run.name_chats()  # the chat folders and names exist before the recap does
    memory = run.card.memory
    chat_id = step.params["chat"]
    text = step.params["text"].strip() + "\n"
    memory.files.write_text(memory.layout.recap_path(chat_id), text)
    run.write_txt("recap", text, header=HAND_WRITTEN_LINE)
    return StepResult({"chat": chat_id, "path": f"局/{chat_id}.md", "provenance": "hand-written",
                       "chars": len(text.strip())}, f"手写复盘 局/{chat_id}.md（{len(text.strip())} 字）")


@handler("delete_recap")
def delete_recap(run: ScenarioRun, step: StepSpec) -> StepResult:
    """The soft path: the user deletes a recap file; the next merge forgets by source."""
    run.name_chats()
    memory = run.card.memory
    chat_id = step.params["chat"]
    path = memory.layout.recap_path(chat_id)
    if not memory.files.exists(path):
        raise ConfigError(f"{step.id}: 没有 局/{chat_id}.md 可删")
    memory.files.delete(path)
    return StepResult({"chat": chat_id, "deleted": f"局/{chat_id}.md"}, f"删掉了 局/{chat_id}.md")


@handler("delete_chat")
def delete_chat(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Delete a whole chat through the library (recap first, then its folder)."""
    run.name_chats()
    chat_id = step.params["chat"]
    existed = run.card.delete_chat(chat_id)
    run.forget_chat(chat_id)
    return StepResult({"chat": chat_id, "existed": bool(existed)}, f"删掉了局 {chat_id}")


@handler("edit_memory")
def edit_memory(run: ScenarioRun, step: StepSpec) -> StepResult:
    """The hard path: the user edits a memory document in the app (:meth:`liyuan.card.CardMemory.change_memory`)."""
    run.name_chats()
    memory = run.card.memory
    ref = step.params["ref"]
    current = memory.read_memory(ref)
    if current is None:
        raise ConfigError(f"{step.id}: 没有 {ref} 这份记忆可改")
    before, version = current
    text = step.params["text"].strip() + "\n"
    memory.change_memory(ref, version, text)
    run.write_txt("memory", text, header=HAND_WRITTEN_EDIT_LINE)
    docs = {d.ref: d for d in memory.list_memory()}
    return StepResult({"ref": ref, "chars_before": len(before.strip()), "chars_after": len(text.strip()),
                       "provenance": "hand-written", "note": docs[ref].note if ref in docs else ""},
                      f"手改 {ref}：{len(before.strip())} → {len(text.strip())} 字")


@handler("fit")
def fit(run: ScenarioRun, step: StepSpec) -> StepResult:
    """The shared budget: fit the resident summary beside other blocks of given sizes."""
    text = run.card.resident_summary()
    if text is None:
        raise ConfigError(f"{step.id}: 还没有常驻摘要，先合并一次")
    lines = [f"常驻摘要原文 {len(text)} 字；上限 {RESIDENT_MAX_CHARS} 字，和其他块共用 {RESIDENT_ENVELOPE_CHARS} 字，"
             f"余量不到 {RESIDENT_MIN_USEFUL_CHARS} 字就整段不送。"]
    results = []
    for other in step.params["other"]:
        allowance = resident_allowance(other)
        fitted = fit_resident_summary(text, other)
        lines.append("")
        lines.append(f"===== 其他块占 {other} 字：余量 min({RESIDENT_MAX_CHARS}, {RESIDENT_ENVELOPE_CHARS} − {other})"
                     f" = {allowance} 字 =====")
        if fitted is None:
            lines.append("（返回 None：余量不够，常驻摘要整段退场）")
        else:
            lines.append(fitted)
            lines.append(f"（结果 {len(fitted)} 字）")
        results.append({"other_chars": other, "allowance": allowance,
                        "result_chars": len(fitted) if fitted is not None else None,
                        "dropped": fitted is None, "result": fitted})
    run.write_txt("fit", "\n".join(lines), header="（常驻摘要是人工撰写的脚本回复；截断由 fit_resident_summary 实算）"
                  if run.setup.kind == "scripted" else None)
    return StepResult({"resident_chars": len(text), "results": results},
                      "；".join(f"{r['other_chars']} → {r['result_chars'] if not r['dropped'] else '不送'}"
                               for r in results))
