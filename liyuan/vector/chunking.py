"""Splitting text into chunks, and condensing a long turn before it is stored.

Invariants (pure functions, no I/O):

- :func:`split_text_chunks` never returns an empty or whitespace-only chunk, and every
  chunk is at most ``max_len`` characters.
- Paragraphs (separated by blank lines) are packed greedily and stay whole unless a
  single paragraph is longer than ``max_len``; only then is it hard-cut. With
  ``overlap``, a chunk may begin with the last paragraphs of the one before; every
  paragraph is still in some chunk, and no chunk is only a repetition.
- :func:`condense` is the identity up to ``CONDENSE_OVER`` characters.

Lengths are Python characters (code points). The original counts UTF-16 code units;
the two differ only for astral characters (emoji), where ours never splits a pair.
"""

from __future__ import annotations

import re

__all__ = [
    "ARCHIVE_CHUNK_CHARS",
    "ARCHIVE_OVERLAP",
    "CONDENSE_HEAD",
    "CONDENSE_OVER",
    "CONDENSE_TAIL",
    "IMPORT_CHUNK_CHARS",
    "MANUAL_WHOLE_CHARS",
    "MAX_CHUNK_CHARS",
    "MIN_CHUNK_CHARS",
    "MIN_INGEST_CHARS",
    "condense",
    "split_text_chunks",
]

ARCHIVE_CHUNK_CHARS = 600
ARCHIVE_OVERLAP = 1
"""Turns (paragraphs) an archive chunk repeats from the one before (issue 25)."""
IMPORT_CHUNK_CHARS = 600
MANUAL_WHOLE_CHARS = 800
"""A manual addition up to this length is stored as one chunk."""
MAX_CHUNK_CHARS = 4000
"""Hard cap on any stored chunk."""
MIN_CHUNK_CHARS = 8
"""Pieces shorter than this (after trimming) are dropped."""
MIN_INGEST_CHARS = 20
"""Archive and per-turn texts shorter than this are not stored at all."""
CONDENSE_OVER = 1200
CONDENSE_HEAD = 600
CONDENSE_TAIL = 400

_PARAGRAPH_BREAK = re.compile(r"\n{2,}")


def split_text_chunks(text: str, max_len: int = 480, *, overlap: int = 0) -> list[str]:
    """Split ``text`` on blank lines and pack the paragraphs into chunks.

    Args:
        text: Any text; ``\\r\\n`` is normalised first.
        max_len: Upper bound on a chunk's length (at least 1); the original's
            default of 480 when a caller does not say.
        overlap: Paragraphs of a chunk repeated at the start of the next one, as far
            as they fit (an archive's paragraphs are turns: a reply like "I'll give it
            a try" keeps the question it answers, issue 25). Nothing is repeated after
            a paragraph that had to be hard-cut.

    Returns:
        Trimmed, non-empty chunks in text order.
    """
    max_len = max(1, max_len)
    paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n"))]
    chunks: list[str] = []
    buffer: list[str] = []
    own = 0  # paragraphs of the buffer not already in the previous chunk

    def fits(parts: list[str]) -> bool:
        return sum(map(len, parts)) + 2 * (len(parts) - 1) <= max_len

    for paragraph in paragraphs:
        if not paragraph:
            continue
        if len(paragraph) > max_len:
            if own:
                chunks.append("\n\n".join(buffer))
            buffer, own = [], 0
            chunks.extend(
                piece
                for start in range(0, len(paragraph), max_len)
                if (piece := paragraph[start : start + max_len].strip())
            )
            continue
        if not fits([*buffer, paragraph]):
            if own:
                chunks.append("\n\n".join(buffer))
                buffer = buffer[-overlap:] if overlap > 0 else []
                own = 0
            while buffer and not fits([*buffer, paragraph]):
                buffer = buffer[1:]
        buffer.append(paragraph)
        own += 1
    if own:
        chunks.append("\n\n".join(buffer))
    return chunks


def condense(text: str) -> str:
    """Keep the head and the tail of a long turn: ``head + "\\n…\\n" + tail``.

    A turn longer than ``CONDENSE_OVER`` characters becomes its first ``CONDENSE_HEAD``
    and last ``CONDENSE_TAIL`` characters around an ellipsis line: the opening says
    where the turn went, the ending says where it left things.
    """
    if len(text) <= CONDENSE_OVER:
        return text
    return f"{text[:CONDENSE_HEAD]}\n…\n{text[-CONDENSE_TAIL:]}"
