"""The shared budget of the per-turn memory blocks.

The resident summary (常驻摘要, the card's memory of earlier games), the in-session relay
summary, the ledger text (【世界状态】) and the roster (【登场名录】) are sent with every
turn and share one envelope of :data:`RESIDENT_ENVELOPE_CHARS` characters. The resident
summary is the one that yields: it is cut at a paragraph break, and dropped entirely
once too little of it would be left to be useful.

Invariant: :func:`fit_resident_summary` never returns more characters than its
allowance, ``min(RESIDENT_MAX_CHARS, RESIDENT_ENVELOPE_CHARS - other_chars)``, and a text
that already fits comes back unchanged.

Lengths are UTF-16 code units, as in the original and in :mod:`liyuan.story.compact`
(:func:`~liyuan.text.utf16_len`): a Chinese character counts 1, an emoji 2. Cuts
never split a character; where the original could cut between the two halves of an
emoji, this port keeps one unit less.
"""

from __future__ import annotations

from liyuan.text import utf16_len, utf16_prefix

__all__ = [
    "OMITTED_MARKER",
    "RESIDENT_ENVELOPE_CHARS",
    "RESIDENT_MAX_CHARS",
    "RESIDENT_MIN_USEFUL_CHARS",
    "fit_resident_summary",
    "other_chars_for",
    "resident_allowance",
]

RESIDENT_MAX_CHARS = 1200
"""The resident summary's own cap (the merge prompt asks the model for at most this)."""

RESIDENT_ENVELOPE_CHARS = 4300
"""Resident summary + in-session summary + ledger text + roster, together."""

RESIDENT_MIN_USEFUL_CHARS = 200
"""Below this allowance a cut resident summary is not worth sending at all."""

OMITTED_MARKER = "\n（……余下内容因篇幅略）"
"""Appended on its own line after a cut; counted inside the allowance."""


def resident_allowance(other_chars: int, envelope: int = RESIDENT_ENVELOPE_CHARS) -> int:
    """How many characters the resident summary may take this turn.

    Args:
        other_chars: Characters already taken by the in-session summary, the ledger
            text and the roster (see :func:`other_chars_for`).
        envelope: The shared budget (an app may configure another one).

    Returns:
        ``min(RESIDENT_MAX_CHARS, envelope - other_chars)``; may be zero or negative
        when the other blocks alone fill the envelope.
    """
    return min(RESIDENT_MAX_CHARS, envelope - other_chars)


def other_chars_for(summary: str | None, state_text: str, roster: str) -> int:
    """The characters the resident summary shares its envelope with.

    The block labels (``【世界状态】``, ``【登场名录】``) are not counted: only the
    texts the caller would send.

    Args:
        summary: The in-session relay summary, if the branch has one.
        state_text: The ledger as :func:`liyuan.session.state.format_state` renders it.
        roster: The roster as :func:`liyuan.session.state.format_roster` renders it.

    Returns:
        The sum of the three lengths.
    """
    return utf16_len(summary or "") + utf16_len(state_text) + utf16_len(roster)


# --8<-- [start:fit_resident_summary]
def fit_resident_summary(text: str | None, other_chars: int, envelope: int = RESIDENT_ENVELOPE_CHARS) -> str | None:
    """Fit the resident summary into what the envelope has left.

    Args:
        text: The resident summary as stored (``None`` or blank: nothing to send).
        other_chars: Characters of the in-session summary, ledger and roster.
        envelope: The shared budget (default 4300).

    Returns:
        The text unchanged when it fits; ``None`` when it does not fit and the
        allowance is under :data:`RESIDENT_MIN_USEFUL_CHARS`; otherwise the text cut at
        its last paragraph break (else line break) at or after character 200, trailing
        space removed, followed by :data:`OMITTED_MARKER`. Never longer than the
        allowance.
    """
    # --8<-- [start:fit_rule]
    if text is None or not text.strip():
        return None
    allowance = resident_allowance(other_chars, envelope)
    if utf16_len(text) <= allowance:
        return text
    if allowance < RESIDENT_MIN_USEFUL_CHARS:
        return None
    # Reserve room for the marker first, so the marker can never push us over.
    head = utf16_prefix(text, allowance - utf16_len(OMITTED_MARKER))
    cut = head.rfind("\n\n")
    if cut < 0 or utf16_len(head[:cut]) < RESIDENT_MIN_USEFUL_CHARS:
        cut = head.rfind("\n")
    if cut < 0 or utf16_len(head[:cut]) < RESIDENT_MIN_USEFUL_CHARS:
        cut = len(head)  # no usable break: keep the whole head
    return head[:cut].rstrip() + OMITTED_MARKER
    # --8<-- [end:fit_rule]
# --8<-- [end:fit_resident_summary]
