"""The relay-summary prompt (接力摘要) and the check its reply must pass.

Invariants:

- Every prompt sentence lives in ``prompts/summary_system.j2`` and
  ``prompts/summary_user.j2``; this module only fills them in.
- Material (the story, the previous summary, the ledger) is neutralised before it is
  placed between the prompt's tags (:func:`liyuan.prompts.neutralize`): a story line
  ``</conversation>`` cannot end the conversation block.
- :func:`validate_summary` accepts a reply only if it has the five headings of
  :data:`SUMMARY_HEADINGS` (in any of the heading styles :func:`canonical_heading`
  recognises), each exactly once, in order, each with content; it refuses a reply that
  repeats the system prompt's instructions (:func:`liyuan.compaction.refuse_echo`:
  the prompt names the five headings, so an echo has them) and one wrapped in more than
  one fence. What it returns is the
  reply without reasoning, without a Markdown fence around it, without any preamble
  before the first heading or chatter after a closing fence, and with its headings
  written canonically; nothing else is changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from liyuan.bounds import check_reply_size, keep_oldest, reply_max_chars
from liyuan.compaction import refuse_echo
from liyuan.errors import ModelOutputError
from liyuan.model import split_reasoning
from liyuan.prompts import Prompt, neutralize, render
from liyuan.text import strip_fence

__all__ = [
    "SUMMARY_HEADINGS",
    "SUMMARY_MAX_TOKENS",
    "Sections",
    "build_summary_prompt",
    "canonical_heading",
    "parse_sections",
    "validate_summary",
]

SUMMARY_HEADINGS = ("## 前情提要", "## 人物", "## 承诺与伏笔", "## 事实账", "## 当前场景")
SUMMARY_MAX_TOKENS = 4096
"""Room for the five sections plus everything merged in from the previous summary."""
STATE_INPUT_MAX_CHARS = 20000
"""The ledger sent with a summary call is cut to its start beyond this (UTF-16 units)."""


def build_summary_prompt(
    conversation_text: str,
    *,
    state_text: str,
    previous_summary: str | None,
    language: str,
    user_name: str,
    omitted_chars: int = 0,
) -> Prompt:
    """Render the five-section relay-summary prompt.

    The caller bounds the conversation (:func:`liyuan.bounds.keep_newest`) and passes how
    much it left out, which the prompt says. The previous summary is cut to what one
    summary may be (:func:`liyuan.bounds.reply_max_chars`; only a summary stored before
    replies were bounded is longer), the ledger to :data:`STATE_INPUT_MAX_CHARS`.

    Args:
        conversation_text: The covered region, as :func:`liyuan.story.history.serialize_for_summary` writes it.
        state_text: The ledger as :func:`liyuan.session.state.format_state` writes it; auxiliary only.
        previous_summary: The summary this one replaces; merged in when given.
        language: Output language, e.g. ``中文``.
        user_name: The user's character name, used in the 人物 section's instructions.
        omitted_chars: UTF-16 units of the oldest covered text not sent (0: all sent).

    Returns:
        A :class:`~liyuan.prompts.Prompt` with purpose ``summary`` and max_tokens 4096.
    """
    system = render("summary_system.j2", language=language, user_name=user_name)
    previous = keep_oldest((previous_summary or "").strip(), reply_max_chars(SUMMARY_MAX_TOKENS))[0]
    user = render(
        "summary_user.j2",
        omitted_chars=omitted_chars,
        conversation_text=neutralize(conversation_text, source_tags=False),
        previous_summary=neutralize(previous, source_tags=False) if previous else None,
        state_text=neutralize(keep_oldest(state_text, STATE_INPUT_MAX_CHARS)[0], source_tags=False),
    )
    return Prompt(
        purpose="summary",
        system=system,
        user=user,
        system_template="summary_system.j2",
        user_template="summary_user.j2",
        max_tokens=SUMMARY_MAX_TOKENS,
    )


def canonical_heading(line: str, headings: tuple[str, ...]) -> str | None:
    """The heading of ``headings`` that ``line`` stands for, if it is written as one.

    Models write a required heading in many ways: ``## 前情提要：``, ``##前情提要``,
    ``### 前情提要``, ``# 前情提要``, ``**前情提要**`` or ``## **前情提要**``. A line
    counts when, after trimming, it is one to three ``#`` and/or a ``**`` pair around the
    heading's name, with an optional trailing ``：``/``:``. The bare name alone does not
    count (it could be a line of content), nor does a level-4 or deeper heading.

    Returns:
        The canonical form from ``headings`` (``## 前情提要``), or ``None``.
    """
    text = line.strip()
    level = len(text) - len(text.lstrip("#"))
    if level > 3:
        return None
    text = text[level:].strip().rstrip("：:").rstrip()
    bold = len(text) > 4 and text.startswith("**") and text.endswith("**")
    if bold:
        text = text[2:-2].strip().rstrip("：:").rstrip()
    if not level and not bold:
        return None
    names = {heading.lstrip("#").strip(): heading for heading in headings}
    return names.get(text)


_FENCE_LINE_RE = re.compile(r"[ \t]*(?:`{3,}|~{3,})[\w+.-]*[ \t]*")


def _is_fence(line: str) -> bool:
    return _FENCE_LINE_RE.fullmatch(line) is not None


def _drop_outer_fence(preamble: list[str], body: list[str], last_heading: int) -> list[str]:
    """Remove a closing fence line that belongs to no block of the document itself.

    Only an unmatched fence line after the last heading is touched. When the preamble
    opened a fence (``好的：`` then a ```` ```markdown ```` line, the document inside), that
    line closes the wrapper and whatever follows it (``以上。``) lies outside the
    document: both go. Without an opening in the preamble, the line goes only when
    nothing but blank lines follows it. Chatter with no fence around it cannot be told
    from content and stays.
    """
    fences = [i for i, line in enumerate(body) if _is_fence(line)]
    if len(fences) % 2 == 0 or fences[-1] <= last_heading:
        return body
    last = fences[-1]
    opened_before = sum(map(_is_fence, preamble)) % 2 == 1
    if opened_before or not "".join(body[last + 1 :]).strip():
        return body[:last]
    return body


@dataclass(frozen=True)
class Sections:
    """A reply split at its first required heading (see :func:`parse_sections`)."""

    preamble: tuple[str, ...]
    """Lines before the first heading: chatter, an opening fence, a recap's title line."""
    document: str
    """From the first heading on: canonical headings, trimmed, no wrapper fence."""


def parse_sections(text: str, headings: tuple[str, ...], *, what: str = "摘要", instructions: str = "") -> Sections:
    """Check that a reply has ``headings``, each once, in order, each with content.

    Shared by the relay summary and the recap: both are documents whose shape the
    prompt fixes, and a reply of the wrong shape (an echo of the prompt, a reply cut
    off by the token limit) must not land anywhere. Reasoning is split off and a fence
    around the whole reply removed (:func:`liyuan.text.strip_fence`: language tag,
    trailing spaces, CRLF, ``~~~``); heading lines written in a model's own style are
    recognised and rewritten canonically (:func:`canonical_heading`); a closing fence
    left after the last section, and chatter after that fence, are dropped.

    Args:
        text: The model's reply.
        headings: The required section headings, in order (``## name``).
        what: What the document is called in error messages (``摘要``, ``复盘``).
        instructions: The system prompt the reply answers; a reply repeating it, or
            carrying one of our tags, is refused (:func:`liyuan.compaction.refuse_echo`).
            Empty: the sentences are not checked.

    Returns:
        The preamble lines and the document from its first heading on.

    Raises:
        ModelOutputError: With a Chinese reason when the reply is empty, echoes the
            prompt, is wrapped in more than one fence, a heading is missing, repeated or
            out of order, or a section has no content.
    """
    raw = split_reasoning(text)[0].replace("\r\n", "\n").strip()
    answer = strip_fence(raw)
    if not answer:
        raise ModelOutputError(f"{what}为空")
    refuse_echo(answer, instructions, what)
    lines = answer.split("\n")
    found: dict[str, list[int]] = {h: [] for h in headings}
    for number, line in enumerate(lines):
        heading = canonical_heading(line, headings)
        if heading is not None:
            found[heading].append(number)
            lines[number] = heading
    missing = [h for h in headings if not found[h]]
    if missing:
        raise ModelOutputError(_missing_reason(missing, headings, what))
    for heading, positions in found.items():
        if len(positions) > 1:
            raise ModelOutputError(f"小节「{heading}」出现了 {len(positions)} 次")
    starts = [found[h][0] for h in headings]
    if starts != sorted(starts):
        order = "、".join(h.removeprefix("## ") for h in sorted(headings, key=lambda h: found[h][0]))
        raise ModelOutputError(f"小节顺序不对：{order}")
    # Anything before the first heading is chatter ("好的，以下是摘要："), not the document.
    preamble, body = lines[: starts[0]], lines[starts[0] :]
    wrappers = sum(map(_is_fence, preamble)) + (answer != raw)
    if wrappers > 1:
        # A fence inside a fence: what is left after one unwrapping still carries fence
        # lines, which would land in the document.
        raise ModelOutputError(f"{what}外面包了不止一层代码块")
    body = _drop_outer_fence(preamble, body, starts[-1] - starts[0])
    offsets = [start - starts[0] for start in starts]
    ends = [*offsets[1:], len(body)]
    for heading, start, end in zip(headings, offsets, ends, strict=True):
        if not "\n".join(body[start + 1 : end]).strip():
            raise ModelOutputError(f"小节「{heading}」没有内容")
    return Sections(tuple(preamble), "\n".join(body).strip())


def _missing_reason(missing: list[str], headings: tuple[str, ...], what: str) -> str:
    """Which sections a reply lacks, and the likeliest why: none at all (plain text), only the
    last ones (the reply ended early: cut off), or some in the middle (a heading renamed)."""
    names = "".join(f"「{h}」" for h in headings)
    if len(missing) == len(headings):
        return f"{what}里没有一个小节标题：应依次有 {names}，每个标题单独一行（回复像是一段纯文本）"
    listed = "".join(f"「{h}」" for h in missing)
    if list(headings[-len(missing):]) == missing:
        return f"缺少小节{listed}：回复在「{headings[-len(missing) - 1]}」之后就没有了，可能被截断了"
    return f"缺少小节{listed}：应依次有 {names}，标题要逐字一致、单独一行"


def validate_summary(text: str, *, instructions: str = "") -> str:
    """Check a relay-summary reply and return it cleaned.

    Args:
        text: The model's reply, possibly with ``<think>`` blocks or a Markdown fence.
        instructions: The system prompt it answers: an echo of it is refused (the echo
            has the five headings, since the prompt names them).

    Returns:
        The summary starting at ``## 前情提要``, trimmed.

    Raises:
        ModelOutputError: When the answer is far longer than :data:`SUMMARY_MAX_TOKENS`
            allows (:func:`liyuan.bounds.check_reply_size`), or :func:`parse_sections`
            rejects it for the five :data:`SUMMARY_HEADINGS`.
    """
    check_reply_size(split_reasoning(text)[0], SUMMARY_MAX_TOKENS, "摘要")
    return parse_sections(text, SUMMARY_HEADINGS, instructions=instructions).document
