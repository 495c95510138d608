"""What a merge reply must be before it may overwrite ``记忆.md`` and ``常驻摘要.md``.

A merge replaces both aggregates, so a bad reply is data loss: the memory it drops has
no other copy in the aggregates, and the next sync sees "no change". The
checks of :func:`check_merge`, in order (the first that fails refuses the reply, nothing
is written, the merge stays owed and is retried next sync):

1. The reply did not stop at its token limit (``finish_reason == "length"``): a cut-off
   resident summary or handbook is malformed even when both marks made it in.
2. It is at most :data:`MERGE_MAX_REPLY_CHARS` long (a 1 MB reply is not a merge).
3. It splits at the two mark lines (:func:`liyuan.card.prompts.parse_merge_result`) and
   does not repeat the system prompt (:func:`liyuan.prompts.echoed_instructions`). Its
   handbook part holds the chat blocks it changes and the cross-chat sections; the handbook
   is assembled from it and the previous one (:func:`liyuan.card.handbook.assemble_handbook`),
   so the reply stays bounded however many chats the card has. A reply sent recaps that
   writes no chat block at all (a change list ``- 新增：…``, ``（无改动）``) fails here; one
   sent none (a merge that only forgets) may write only the cross-chat sections. The
   checks below read the assembled handbook.
4. The resident summary starts with its heading :data:`~liyuan.card.prompts.RESIDENT_HEADING`.
5. Every ``[局:id]`` tag and every ``来源：局/<id>.md`` line names a chat that exists:
   one with a folder or a recap on disk, or one the previous aggregates named; never a
   chat being forgotten (``<deleted-chats>``) or forgotten for good by the hard path.
6. No chat block is lost: every ``来源：局/<id>.md`` of the previous handbook is still
   there unless that chat is being (or was) forgotten (the assembly keeps them; this
   guards it).
7. Without a deletion to explain it, the handbook does not shrink to less than
   :data:`HANDBOOK_MIN_KEPT` of its previous length (once that is at least
   :data:`HANDBOOK_SHRINK_FLOOR_CHARS`): "most of its content lost" is not a merge.

A resident summary over :data:`~liyuan.context.budget.RESIDENT_MAX_CHARS` is **cut, not
refused**: at its last paragraph break within the limit, with the omission marker, as
:func:`liyuan.context.budget.fit_resident_summary` cuts it for a turn. Refusing would
repeat an 8,192-token merge on every sync for a model that habitually overshoots, and
would hold back the handbook update and, worse, a forget (``<deleted-chats>``) that the
same reply carries; the handbook keeps the full memory, and what is stored is then
exactly what a turn would send.

Invariant: everything here is pure (text in, text out).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from liyuan.card.handbook import assemble_handbook, chat_refs, source_ids
from liyuan.card.inputs import RecapDiff
from liyuan.card.manifest import Manifest
from liyuan.card.prompts import MERGE_MAX_TOKENS, RESIDENT_HEADING, merge_reply_problem, parse_merge_result
from liyuan.context.budget import RESIDENT_MAX_CHARS, fit_resident_summary
from liyuan.errors import ModelOutputError
from liyuan.model import Completion, require_finished
from liyuan.prompts import echoed_instructions
from liyuan.text import utf16_len

__all__ = [
    "HANDBOOK_MIN_KEPT",
    "HANDBOOK_SHRINK_FLOOR_CHARS",
    "MERGE_MAX_REPLY_CHARS",
    "CheckedMerge",
    "check_merge",
    "merge_needs_every_recap",
]

MERGE_MAX_REPLY_CHARS = 4 * MERGE_MAX_TOKENS
"""32,768 UTF-16 units: four characters per token of the 8,192-token reply budget, more
than any tokenizer packs into a token of Chinese or English prose."""
HANDBOOK_MIN_KEPT = 0.5
"""The share of the previous handbook's length a merge without deletions must keep."""
HANDBOOK_SHRINK_FLOOR_CHARS = 200
"""Below this previous length the shrink check does not apply (the block check still does)."""



@dataclass(frozen=True)
class CheckedMerge:
    """A merge reply that passed :func:`check_merge`."""

    handbook: str
    resident: str
    """The resident summary to store: cut to the limit when it was longer."""
    resident_chars_written: int
    """How long the reply's resident summary was, before any cut (UTF-16 units)."""

    @property
    def resident_cut(self) -> bool:
        """True when the resident summary was cut to :data:`RESIDENT_MAX_CHARS`."""
        return self.resident_chars_written > RESIDENT_MAX_CHARS


def _names(ids: Collection[str]) -> str:
    return "、".join(sorted(ids)[:5]) + ("…" if len(ids) > 5 else "")


def check_merge(
    completion: Completion,
    *,
    previous_handbook: str | None,
    previous_resident: str | None,
    chats: Collection[str],
    deleted: Collection[str],
    forgotten: Collection[str] = (),
    instructions: str = "",
    sent: Collection[str] | None = None,
) -> CheckedMerge:
    """Check a merge reply against the previous aggregates (see the module docstring).

    Args:
        completion: The merge reply.
        previous_handbook: ``记忆.md`` as the merge prompt sent it (``None``: first merge).
        previous_resident: ``常驻摘要.md`` as sent.
        chats: Ids of every chat of the card (folders and recaps on disk).
        deleted: Ids of the chats this merge forgets (``<deleted-chats>``).
        forgotten: Ids the hard path forgot for good (never to come back).
        instructions: The merge's system prompt (an echo of it is refused).
        sent: Ids of the chats whose recaps the merge was sent (then the reply must write
            at least one block); ``None``: taken to be ``chats``.

    Returns:
        Both documents, the resident summary cut to its limit when needed.

    Raises:
        ModelOutputError: With a Chinese reason; nothing may be written.
    """
    require_finished(completion, "合并结果")
    text = completion.text
    if utf16_len(text) > MERGE_MAX_REPLY_CHARS:
        raise ModelOutputError(f"合并结果有 {utf16_len(text)} 字，超过任何一次合并可能的长度 {MERGE_MAX_REPLY_CHARS}")
    parsed = parse_merge_result(text)
    if parsed is None:
        raise ModelOutputError(f"回复格式不对：{merge_reply_problem(text)}")
    handbook, resident = parsed
    echo = echoed_instructions(text, instructions) if instructions else None
    if echo is not None:
        raise ModelOutputError(f"合并结果照抄了 prompt 里的要求（如「{echo}」）")
    if resident.split("\n", 1)[0].strip() != RESIDENT_HEADING:
        raise ModelOutputError(f"常驻摘要的第一行不是「{RESIDENT_HEADING}」")
    old_handbook, old_resident = previous_handbook or "", previous_resident or ""
    gone = set(deleted)
    # The reply writes the blocks of the recaps it was sent and the cross-chat sections;
    # the rest of the handbook is the previous one's.
    if (chats if sent is None else sent) and not source_ids(handbook):
        raise ModelOutputError("手册部分一个局的块（来源：局/<id>.md）都没有：像是改动清单，不是按局写的块")
    handbook = assemble_handbook(old_handbook, handbook, gone=gone | set(forgotten))
    known = (set(chats) | chat_refs(old_handbook) | chat_refs(old_resident)) - gone - set(forgotten)
    unknown = (chat_refs(handbook) | chat_refs(resident)) - known
    if unknown:
        raise ModelOutputError(f"合并结果提到了不存在或已删除的局：{_names(unknown)}")
    new_blocks = source_ids(handbook)
    lost = source_ids(old_handbook) - gone - set(forgotten) - new_blocks
    if lost:
        raise ModelOutputError(f"手册丢了 {_names(lost)} 的整块（来源：局/…），而这些局并没有被删除")
    before, after = utf16_len(old_handbook.strip()), utf16_len(handbook)
    if not gone and before >= HANDBOOK_SHRINK_FLOOR_CHARS and after < before * HANDBOOK_MIN_KEPT:
        raise ModelOutputError(f"手册从 {before} 字缩到了 {after} 字，却没有删除任何一局：像是丢了内容")
    written = utf16_len(resident)
    if written > RESIDENT_MAX_CHARS:
        cut = fit_resident_summary(resident, 0)  # the allowance is the full 1,200: never None
        resident = cut if cut is not None else resident
    return CheckedMerge(handbook, resident, written)


def merge_needs_every_recap(handbook: str | None, resident: str | None, diff: RecapDiff, manifest: Manifest) -> bool:
    """True when a merge is due that could never pass: aggregates exist, yet the handbook names
    no chat's block and some recap is not sent (a reply can only write blocks for recaps it is
    given, and :func:`check_merge` refuses a handbook without any). A hand edit does this."""
    manual = manifest.manual
    if manual is not None and (manual.aggregate_pinned or manual.pending):
        return False  # no merge now anyway
    due = not diff.empty or (manual is not None and manual.merge_requested)
    sent = {recap.chat_id for recap in diff.changed}
    return (due and bool(handbook or resident) and not source_ids(handbook or "")
            and bool(set(diff.hashes) - sent))
