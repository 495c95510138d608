"""Card-memory prompts (recap, merge) and the parser of the merge reply.

Story text, recaps, hand-edited aggregates and chat names are **material**: whatever they
say, they cannot change the structure of a prompt or of a parsed reply.

- When a prompt is built, material is neutralised (:func:`liyuan.prompts.neutralize`,
  re-exported here): our own tag names (``<recap``, ``</recap>``, ``<deleted-chats>``,
  ...) get a full-width ``＜``, the two mark lines get full-width ``＝``, and in recaps
  and transcripts the source tags ``[局:id]`` become ``［局：id］``. Only the code writes
  real tags, one ``<recap>`` per changed recap and one ``<deleted-chats>`` line per
  chat the code decided to forget.
- Replies are unwrapped by :func:`liyuan.text.strip_fence` (re-exported here), the one
  fence reader of the package; recap headings are checked and normalised by
  :func:`liyuan.story.scribe.parse_sections`.
- :func:`parse_merge_result` accepts a reply only when each mark appears exactly once,
  alone on its line, handbook mark first, and both parts are non-empty. A forged or
  repeated mark makes the reply malformed: nothing is written, the merge is retried.
- Sizes are bounded (:mod:`liyuan.bounds`): a recap reply far over :data:`RECAP_MAX_TOKENS`
  is refused; a previous recap and each recap sent to the merge are cut to what one
  recap may be (the merge prompt says how much of a recap was left out), the resident
  summary to what one merge may return. Of the handbook only what the merge needs is
  sent (:func:`liyuan.card.handbook.merge_excerpt`): the blocks of the chats whose recaps
  it carries, the cross-chat sections and the text outside blocks, so the prompt does not
  grow with the number of chats; the reply writes those blocks and the cross-chat
  sections, and the code assembles the handbook.

Invariant: every function here is pure (text in, text out).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from liyuan.bounds import check_reply_size, keep_oldest, reply_max_chars
from liyuan.card.handbook import BLOCK_MAX_CHARS, SHARED_MAX_CHARS, block_titles, merge_excerpt
from liyuan.context.budget import RESIDENT_MAX_CHARS
from liyuan.errors import ModelOutputError
from liyuan.model import split_reasoning
from liyuan.prompts import Prompt, echoed_tag, neutralize, render
from liyuan.story.scribe import STATE_INPUT_MAX_CHARS, parse_sections
from liyuan.text import strip_fence

if TYPE_CHECKING:
    from liyuan.card.inputs import ChangedRecap, ChatEvidence, SyncSettings

__all__ = [
    "HANDBOOK_MARK",
    "MERGE_MAX_TOKENS",
    "RECAP_HEADINGS",
    "RECAP_MAX_TOKENS",
    "RESIDENT_HEADING",
    "RESIDENT_MARK",
    "build_merge_prompt",
    "build_recap_prompt",
    "merge_reply_problem",
    "parse_merge_result",
    "validate_recap",
]

HANDBOOK_MARK = "===== 记忆.md ====="
RESIDENT_MARK = "===== 常驻摘要.md ====="
RESIDENT_HEADING = "# 往局记忆（同一世界更早的几局）"
RECAP_MAX_TOKENS = 4096
RECAP_HEADINGS = ("## 剧情脉络", "## 人物与关系", "## 既定事实", "## 未了之事", "## 用户的玩法偏好")
"""The recap's sections, in the order recap_system.j2 asks for them."""
MERGE_MAX_TOKENS = 8192


def _attr(value: str) -> str:
    # Attribute values are material too: no quote may end them, no newline may break
    # the tag line, no angle bracket may open a tag.
    value = " ".join(value.split())
    return neutralize(value).replace('"', "＂").replace("<", "＜").replace(">", "＞")


def build_recap_prompt(
    evidence: ChatEvidence,
    *,
    chat_name: str,
    previous_recap: str | None,
    language: str,
    user_name: str,
    char_name: str,
) -> Prompt:
    """The recap prompt for one chat (purpose ``recap``, max 4096 tokens).

    Args:
        evidence: From :func:`~liyuan.card.inputs.collect_chat_evidence`.
        chat_name: The chat's display name.
        previous_recap: The chat's existing recap, merged into the new one.
        language: Output language, e.g. ``中文``.
        user_name: The user's name in the story.
        char_name: The card's character name.

    Returns:
        The rendered prompt.
    """
    system = render("recap_system.j2", language=language, user_name=user_name, char_name=char_name)
    previous = keep_oldest(previous_recap.strip(), reply_max_chars(RECAP_MAX_TOKENS))[0] if previous_recap else ""
    user = render(
        "recap_user.j2",
        omitted_chars=evidence.omitted_chars,
        chat_name=_attr(chat_name),
        turns=evidence.turns,
        transcript=neutralize(evidence.transcript),
        previous_recap=neutralize(previous) if previous else None,
        state_snapshot=neutralize(keep_oldest(evidence.state_snapshot, STATE_INPUT_MAX_CHARS)[0]),
    )
    return Prompt("recap", system, user, "recap_system.j2", "recap_user.j2", RECAP_MAX_TOKENS)


def build_merge_prompt(
    settings: SyncSettings,
    *,
    handbook: str | None,
    resident: str | None,
    changed: Sequence[ChangedRecap],
    deleted: Sequence[str],
    revised: Sequence[str] = (),
) -> Prompt:
    """The merge prompt (purpose ``merge``, max 8192 tokens): both documents, one call.

    The reply writes the blocks of the chats in ``changed`` and the cross-chat sections
    (:mod:`liyuan.card.handbook` assembles the handbook) and the whole resident summary.

    Args:
        handbook: The current ``记忆.md`` (``None``: first merge); only its excerpt for
            ``changed`` is sent (``<handbook omitted-blocks="N">``), and the titles of the
            deleted chats' blocks.
        resident: The current ``常驻摘要.md``.
        changed: New or changed recaps, each sent in its own ``<recap>`` block.
        deleted: Ids of deleted chats; each becomes a ``- 局/<id>.md`` line.
        settings: The output language, the names (the user's names the preferences section)
            and ``merge_recap_max_chars``, the longest recap sent (UTF-16 units): a longer one
            (written by hand: a recap reply cannot be) is cut at a paragraph and the prompt
            says how much was left out; ``None``: :func:`~liyuan.bounds.reply_max_chars` of
            :data:`RECAP_MAX_TOKENS`.
        revised: Chats whose recap follows an edit or deletion (:mod:`liyuan.card.revised`): named in
            ``<revised-chats>``; the handbook given has their old lines taken out already, and
            ``resident`` should be ``None`` (the prompt says the resident summary is written anew).

    Returns:
        The rendered prompt.
    """
    limit = settings.merge_recap_max_chars
    limit = limit if limit is not None else reply_max_chars(RECAP_MAX_TOKENS)
    recaps = [(r, *keep_oldest(r.text, limit)) for r in changed]
    resident = keep_oldest(resident, reply_max_chars(MERGE_MAX_TOKENS))[0] if resident else resident
    system = render(
        "merge_system.j2",
        language=settings.language,
        user_name=settings.user_name,
        char_name=settings.char_name,
        resident_max_chars=RESIDENT_MAX_CHARS,
        block_max_chars=BLOCK_MAX_CHARS,
        shared_max_chars=SHARED_MAX_CHARS,
        resident_heading=RESIDENT_HEADING,
        handbook_mark=HANDBOOK_MARK,
        resident_mark=RESIDENT_MARK,
    )
    excerpt = merge_excerpt(handbook.strip(), {r.chat_id for r in changed}) if handbook and handbook.strip() else None
    titles = block_titles(handbook, deleted) if handbook else {}
    user = render(
        "merge_user.j2",
        handbook=neutralize(excerpt.text, source_tags=False) if excerpt is not None else None,
        omitted_blocks=excerpt.omitted_blocks - len(titles) if excerpt is not None else 0,  # less the deleted
        resident=neutralize(resident.strip(), source_tags=False) if resident and resident.strip() else None,
        deleted=[{"chat_id": chat_id, "title": f"（{_attr(titles[chat_id])}）" if chat_id in titles else ""}
                 for chat_id in deleted],
        revised=list(revised),
        changed=[
            {"chat_id": r.chat_id, "name": _attr(r.name), "text": neutralize(text), "omitted_chars": omitted}
            for r, text, omitted in recaps
        ],
    )
    return Prompt("merge", system, user, "merge_system.j2", "merge_user.j2", MERGE_MAX_TOKENS)


def parse_merge_result(text: str) -> tuple[str, str] | None:
    """Split a merge reply into ``(handbook, resident)``.

    Args:
        text: The model's reply.

    Returns:
        Both documents, trimmed and fence-stripped; ``None`` when a mark is missing or
        appears more than once, the resident mark comes first, or either part is empty
        (:func:`merge_reply_problem` says which).
        Text before the handbook mark (a model's preamble) is ignored.
    """
    split = _split_merge_reply(text)
    return split if isinstance(split, tuple) else None


def merge_reply_problem(text: str) -> str | None:
    """Why :func:`parse_merge_result` cannot split ``text`` (a Chinese reason), or ``None``."""
    split = _split_merge_reply(text)
    return None if isinstance(split, tuple) else split


def _split_merge_reply(text: str) -> tuple[str, str] | str:
    lines = strip_fence(text).split("\n")
    handbook_at = [i for i, line in enumerate(lines) if line.strip() == HANDBOOK_MARK]
    resident_at = [i for i, line in enumerate(lines) if line.strip() == RESIDENT_MARK]
    if not handbook_at and not resident_at:
        return f"没有两行标记「{HANDBOOK_MARK}」「{RESIDENT_MARK}」：两份文件都要写，各自以标记行开头"
    for mark, found in ((HANDBOOK_MARK, handbook_at), (RESIDENT_MARK, resident_at)):
        if not found:
            return f"缺少标记行「{mark}」（每份文件前单独一行）"
        if len(found) > 1:
            return f"标记行「{mark}」出现了 {len(found)} 次"
    start, middle = handbook_at[0], resident_at[0]
    if middle < start:
        return f"两份文件顺序颠倒：「{HANDBOOK_MARK}」应在「{RESIDENT_MARK}」之前"
    handbook = strip_fence("\n".join(lines[start + 1 : middle]))
    resident = strip_fence("\n".join(lines[middle + 1 :]))
    for name, part in (("记忆.md", handbook), ("常驻摘要.md", resident)):
        if not part:
            return f"{name} 一份是空的"
    tag = echoed_tag(handbook) or echoed_tag(resident)
    if tag:
        # The reply copied its input (<recap ...>, <handbook> ...): not a merge.
        return f"里面有 prompt 自己的标签 {tag}：像是照抄了输入"
    return handbook, resident


def validate_recap(text: str, *, instructions: str = "") -> str:
    """Check a recap reply: a ``# `` title line, then the five :data:`RECAP_HEADINGS`.

    The original accepted any non-blank reply; a real small model showed why that is
    not enough (its echo of the prompt landed in ``局/<id>.md``). A reply of the wrong
    shape now fails the recap, writes nothing, and the chat is retried next sync.
    ``instructions`` (the system prompt) makes an echo of the prompt fail too; a reply
    wrapped in two fences fails (:func:`liyuan.story.scribe.parse_sections`).

    Returns:
        The title line, a blank line, then the sections as :func:`liyuan.story.scribe.parse_sections`
        cleans them (no reasoning, fence or closing chatter; headings written canonically).

    Raises:
        ModelOutputError: With a Chinese reason (also when the reply is far longer than
            :data:`RECAP_MAX_TOKENS` allows).
    """
    check_reply_size(split_reasoning(text)[0], RECAP_MAX_TOKENS, "复盘")
    sections = parse_sections(text, RECAP_HEADINGS, what="复盘", instructions=instructions)
    titles = [line.strip() for line in sections.preamble if line.startswith("# ") and line[2:].strip()]
    if not titles:
        raise ModelOutputError("复盘缺少标题行「# <一句话概括这一局>」")
    if re.fullmatch(r"#\s*[<＜].*[>＞]", titles[-1]):
        raise ModelOutputError(f"复盘标题还是模版里的占位符：{titles[-1]}")
    return f"{titles[-1]}\n\n{sections.document}"
