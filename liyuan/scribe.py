"""The relay-summary prompt (接力摘要) and the check its reply must pass.

Invariants:

- Every prompt sentence lives in ``prompts/summary_system.j2`` and
  ``prompts/summary_user.j2``; this module only fills them in.
- :func:`validate_summary` accepts a reply only if it has the five headings of
  :data:`SUMMARY_HEADINGS`, each exactly once, in order, each with content. What it
  returns is the reply without reasoning, without a Markdown fence around it and
  without any preamble before the first heading; nothing else is changed.
"""

from __future__ import annotations

import re

from .errors import ModelOutputError
from .model import split_reasoning
from .prompts import Prompt, render

__all__ = [
    "SUMMARY_HEADINGS",
    "SUMMARY_MAX_TOKENS",
    "build_summary_prompt",
    "validate_sections",
    "validate_summary",
]

SUMMARY_HEADINGS = ("## 前情提要", "## 人物", "## 承诺与伏笔", "## 事实账", "## 当前场景")
SUMMARY_MAX_TOKENS = 4096
"""Room for the five sections plus everything merged in from the previous summary."""

_FENCE_RE = re.compile(r"\A```[\w-]*\n(?P<body>.*?)\n```\Z", re.DOTALL)


def build_summary_prompt(
    conversation_text: str,
    *,
    state_text: str,
    previous_summary: str | None,
    language: str,
    user_name: str,
) -> Prompt:
    """Render the five-section relay-summary prompt.

    Args:
        conversation_text: The covered region, as :func:`liyuan.compact.serialize_for_summary` writes it.
        state_text: The ledger as :func:`liyuan.state.format_state` writes it; auxiliary only.
        previous_summary: The summary this one replaces; merged in when given.
        language: Output language, e.g. ``中文``.
        user_name: The user's character name, used in the 人物 section's instructions.

    Returns:
        A :class:`~liyuan.prompts.Prompt` with purpose ``summary`` and max_tokens 4096.
    """
    system = render("summary_system.j2", language=language, user_name=user_name)
    user = render(
        "summary_user.j2",
        conversation_text=conversation_text,
        previous_summary=(previous_summary or "").strip() or None,
        state_text=state_text,
    )
    return Prompt(
        purpose="summary",
        system=system,
        user=user,
        system_template="summary_system.j2",
        user_template="summary_user.j2",
        max_tokens=SUMMARY_MAX_TOKENS,
    )


def _heading_lines(lines: list[str], headings: tuple[str, ...]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {h: [] for h in headings}
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped in found:
            found[stripped].append(number)
    return found


def validate_sections(text: str, headings: tuple[str, ...], *, what: str = "摘要") -> str:
    """Check that a reply has ``headings``, each once, in order, each with content.

    Shared by the relay summary and the recap: both are documents whose shape the
    prompt fixes, and a reply of the wrong shape (an echo of the prompt, a reply cut
    off by the token limit) must not land anywhere.

    Args:
        text: The model's reply, possibly with ``<think>`` blocks or a Markdown fence.
        headings: The required section headings, in order.
        what: What the document is called in error messages (``摘要``, ``复盘``).

    Returns:
        The reply from its first heading on, trimmed, without reasoning or fence.

    Raises:
        ModelOutputError: With a Chinese reason when the reply is empty, a heading is
            missing, repeated or out of order, or a section has no content.
    """
    answer, _reasoning = split_reasoning(text)
    fenced = _FENCE_RE.match(answer)
    if fenced:
        answer = fenced.group("body").strip()
    if not answer:
        raise ModelOutputError(f"{what}为空")
    lines = answer.splitlines()
    found = _heading_lines(lines, headings)
    for heading, positions in found.items():
        if not positions:
            raise ModelOutputError(f"缺少小节「{heading}」（可能被截断了）")
        if len(positions) > 1:
            raise ModelOutputError(f"小节「{heading}」出现了 {len(positions)} 次")
    starts = [found[h][0] for h in headings]
    if starts != sorted(starts):
        order = "、".join(h.removeprefix("## ") for h in sorted(headings, key=lambda h: found[h][0]))
        raise ModelOutputError(f"小节顺序不对：{order}")
    ends = [*starts[1:], len(lines)]
    for heading, start, end in zip(headings, starts, ends, strict=True):
        if not "\n".join(lines[start + 1 : end]).strip():
            raise ModelOutputError(f"小节「{heading}」没有内容")
    # Anything before the first heading is chatter ("好的，以下是摘要："), not the document.
    return "\n".join(lines[starts[0] :]).strip()


def validate_summary(text: str) -> str:
    """Check a relay-summary reply and return it cleaned.

    Args:
        text: The model's reply, possibly with ``<think>`` blocks or a Markdown fence.

    Returns:
        The summary starting at ``## 前情提要``, trimmed.

    Raises:
        ModelOutputError: When :func:`validate_sections` rejects it for the five
            :data:`SUMMARY_HEADINGS`.
    """
    return validate_sections(text, SUMMARY_HEADINGS)
