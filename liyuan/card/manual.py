"""The hard path: reading, listing, searching and changing card memory by reference.

Refs: ``card:handbook`` (记忆.md), ``card:resident`` (常驻摘要.md) and
``card:recap:<chatId>`` (局/<chatId>.md). A document's version is the sha256 of its text.

Invariants:

- A change names the version it was based on; a stale version (or a document that no
  longer exists) is refused with :class:`VersionConflict` and changes nothing.
- The manifest is saved **before** any memory file changes, and records what still has
  to be removed in its journal (``manual.pending``). A crash after that save fails
  closed: the next sync (or hard-path call) finishes the removals before anything is
  merged, so a hard-deleted chat can never leak back through an old aggregate.
- Editing or deleting a recap clears every merge record and retires both aggregates
  (unless hand-protected) to ``.history/``: the next sync rebuilds them from the
  remaining recaps, so no model decides which entries of a hard-deleted chat go.
- Editing an aggregate protects it and pins merging (sync skips the merge, so it never
  overwrites the edit); the other aggregate stays in place. Only :func:`resume_merging`
  lifts the pin, and the merge that follows starts from the hand-edited text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from liyuan.card.files import sha256_text
from liyuan.card.layout import CardLayout, validate_chat_id
from liyuan.card.manifest import Manifest, ManualState, finish_pending, load_manifest, save_manifest
from liyuan.card.memstore import MemoryStore
from liyuan.errors import ConfigError, VersionConflict
from liyuan.text import utf16_len

__all__ = [
    "HANDBOOK_REF",
    "PROTECTED_NOTE",
    "RECAP_REF_PREFIX",
    "RESIDENT_REF",
    "SEARCH_LEAD_CHARS",
    "SEARCH_WINDOW_CHARS",
    "STALE_VERSION_MESSAGE",
    "MemoryDoc",
    "MemoryHit",
    "change_memory",
    "forget_chat_recap",
    "list_memory",
    "read_memory",
    "recap_ref",
    "ref_path",
    "resume_merging",
    "search_memory",
]

HANDBOOK_REF = "card:handbook"
RESIDENT_REF = "card:resident"
RECAP_REF_PREFIX = "card:recap:"
STALE_VERSION_MESSAGE = "记忆版本冲突或引用已失效；请重新读取。"
PROTECTED_NOTE = "手工记忆，自动同步不会覆盖。"
SEARCH_WINDOW_CHARS = 1200
SEARCH_LEAD_CHARS = 160


def recap_ref(chat_id: str) -> str:
    """``card:recap:<chatId>`` (the id is validated)."""
    return RECAP_REF_PREFIX + validate_chat_id(chat_id)


def ref_path(layout: CardLayout, ref: str) -> Path:
    """The file a ref names.

    Raises:
        ConfigError: The ref is not one of the three kinds, or names an invalid chat id.
    """
    if ref == HANDBOOK_REF:
        return layout.handbook
    if ref == RESIDENT_REF:
        return layout.resident
    if ref.startswith(RECAP_REF_PREFIX):
        return layout.recap_path(ref[len(RECAP_REF_PREFIX):])
    raise ConfigError(f"不认识的记忆引用：{ref!r}（可用 card:handbook、card:resident、card:recap:<局id>）")


@dataclass(frozen=True)
class MemoryDoc:
    """One visible memory document."""

    ref: str
    path: str
    """Relative to the memory folder, e.g. ``局/jA.md``."""
    chars: int
    """Length in UTF-16 units, like every character count in liyuan."""
    version: str
    note: str = ""
    """:data:`PROTECTED_NOTE` for hand-protected documents."""


@dataclass(frozen=True)
class MemoryHit:
    """A search hit: which document, how well, and a window of its text."""

    ref: str
    score: float
    """Share of the query words found in the document (0..1]."""
    excerpt: str
    """Up to 1200 chars, starting 160 chars before the earliest match."""


def read_memory(files: MemoryStore, ref: str) -> tuple[str, str] | None:
    """``(text, version)`` of a document, or ``None`` when it does not exist.

    Raises:
        ConfigError: Bad ref.
        MemoryFileError: The document exists but cannot be read.
    """
    text = files.read_text(ref_path(files.layout, ref))
    return None if text is None else (text, sha256_text(text))


def _aggregates_to_retire(manifest: Manifest, layout: CardLayout) -> list[str]:
    names = []
    for ref, path in ((HANDBOOK_REF, layout.handbook), (RESIDENT_REF, layout.resident)):
        if not manifest.is_protected(ref):
            names.append(layout.relative(path))
    return names


def _journal(manifest: Manifest, paths: list[str]) -> None:
    state = manifest.manual_state()
    state.pending = [*state.pending, *(p for p in paths if p not in state.pending)]


def _begin_change(files: MemoryStore) -> tuple[Manifest, ManualState]:
    """The prologue of every hard-path change: load, finish interrupted removals, count it."""
    manifest = load_manifest(files)
    finish_pending(files, manifest)  # the journal of an earlier crash goes first
    state = manifest.manual_state()
    state.epoch += 1
    return manifest, state


def _forget(state: ManualState, chat_id: str) -> None:
    if chat_id not in state.forgotten_chats:
        state.forgotten_chats.append(chat_id)


def _drop_merge_records(manifest: Manifest) -> None:
    # Nothing counts as merged any more: the next sync rebuilds from the recaps alone.
    for record in manifest.recaps.values():
        record.merged_hash = None


def change_memory(files: MemoryStore, ref: str, version: str, content: str | None) -> None:
    """Replace (``content``) or delete (``None``) a memory document by hand.

    A recap change clears every merge record and retires both aggregates (unless
    protected), so the next sync rebuilds them from the remaining recaps. An aggregate
    change pins it: sync stops merging until :func:`resume_merging`, and the other
    aggregate stays in place (a copy goes to ``.history/`` too), so the card keeps its
    cross-session memory meanwhile. The caller holds the card's write lock (see
    :class:`~liyuan.card.sync.CardMemory`).

    Args:
        files: The card's file adapter.
        ref: Which document.
        version: The version the change is based on (from :func:`read_memory`).
        content: The new text, or ``None`` to delete the document.

    Raises:
        ConfigError: Bad ref, or blank content (use ``None`` to delete).
        VersionConflict: The document is gone or has changed since it was read.
    """
    layout = files.layout
    path = ref_path(layout, ref)
    if content is not None and not content.strip():
        raise ConfigError("新内容是空的；要删除这份记忆，请用删除而不是写入空文本。")
    current = files.read_text(path)
    if current is None or sha256_text(current) != version:
        raise VersionConflict(STALE_VERSION_MESSAGE)
    manifest, state = _begin_change(files)
    if ref not in state.protected_refs:
        state.protected_refs.append(ref)
    retire: list[str] = []
    if ref.startswith(RECAP_REF_PREFIX):
        if content is None:
            _forget(state, ref[len(RECAP_REF_PREFIX):])
        _drop_merge_records(manifest)
        retire = _aggregates_to_retire(manifest, layout)
    else:
        # The user's version of an aggregate now speaks for every recap as it is today.
        # Merge records stay: once merging resumes, only what changed after this edit
        # is merged into it, and a chat deleted meanwhile still reaches <deleted-chats>.
        state.aggregate_pinned = True
        for chat_id, text in files.recap_texts(manifest.forgotten()).items():
            state.superseded_recaps[chat_id] = sha256_text(text)
        other = layout.resident if ref == HANDBOOK_REF else layout.handbook
        files.backup_copy(other)  # kept in place; the copy records it as of the pin
    files.backup_copy(path)  # the version the user replaced stays recoverable
    if content is None:
        retire.append(layout.relative(path))
    _journal(manifest, retire)
    save_manifest(files, manifest)  # decided and recorded before any memory file changes
    if content is not None:
        # Checked again right before the write: an editor (which takes no lock) may have
        # saved the file meanwhile. Its text wins; the protection recorded above only
        # keeps sync away from it, which is what a hand edit wants anyway.
        latest = files.read_text(path)
        if latest is None or sha256_text(latest) != version:
            raise VersionConflict(STALE_VERSION_MESSAGE)
        if not files.replace_text(path, content.rstrip() + "\n", latest):  # a save during the write
            raise VersionConflict(STALE_VERSION_MESSAGE)
    finish_pending(files, manifest)


def forget_chat_recap(files: MemoryStore, chat_id: str) -> bool:
    """Forget a chat for good: delete its recap and rebuild both aggregates without it.

    The chat is never recapped again, even if its sessions grow.

    Returns:
        False when the chat has no recap (nothing changes).

    Raises:
        ConfigError: Invalid chat id.
    """
    layout = files.layout
    path = layout.recap_path(chat_id)
    if not files.exists(path):
        return False
    manifest, state = _begin_change(files)
    _forget(state, chat_id)
    _drop_merge_records(manifest)
    _journal(manifest, [layout.relative(path), *_aggregates_to_retire(manifest, layout)])
    save_manifest(files, manifest)
    finish_pending(files, manifest)
    return True


def resume_merging(files: MemoryStore) -> bool:
    """Undo the pin a hand edit of the handbook or resident set.

    Both aggregates lose their protection and the superseded recaps are visible again;
    the next sync merges even when no recap changed, with the hand-edited text as input,
    so the edit is carried into the other aggregate. Hand-edited recaps stay protected.
    The caller holds the card's write lock.

    A merge refused on its inputs (:mod:`liyuan.card.merge_memo`) may be asked once more:
    the memo is cleared, so the next sync pays for one new attempt.

    Returns:
        False when merging was neither paused nor refused (nothing changes).
    """
    manifest, state = _begin_change(files)
    if not state.aggregate_pinned:
        if manifest.refused_merge is None:
            return False  # the counted change is not saved: nothing happened
        manifest.refused_merge = None  # one more paid attempt, asked for by the user
        save_manifest(files, manifest)
        return True
    state.aggregate_pinned = False
    state.merge_requested = True
    state.protected_refs = [r for r in state.protected_refs if r not in (HANDBOOK_REF, RESIDENT_REF)]
    state.superseded_recaps = {}
    save_manifest(files, manifest)
    return True


def _visible_docs(files: MemoryStore, manifest: Manifest) -> list[tuple[str, str]]:
    """``(ref, text)`` of every document a reader should see, in a stable order."""
    layout = files.layout
    docs: list[tuple[str, str]] = []
    for ref in (HANDBOOK_REF, RESIDENT_REF):
        text = files.read_text(ref_path(layout, ref))
        if text is not None:
            docs.append((ref, text))
    superseded = manifest.manual.superseded_recaps if manifest.manual else {}
    for chat_id, text in files.recap_texts(manifest.forgotten()).items():
        if superseded.get(chat_id) == sha256_text(text):
            continue  # folded into a hand-edited aggregate and unchanged since
        docs.append((recap_ref(chat_id), text))
    return docs


def list_memory(files: MemoryStore) -> list[MemoryDoc]:
    """Every visible document: aggregates first, then recaps by chat id.

    Forgotten chats and recaps superseded by a hand-edited aggregate (and unchanged
    since) are hidden.

    Raises:
        MemoryFileError: A document exists but cannot be read, or ``局/`` cannot be
            listed (never an empty list).
    """
    manifest = load_manifest(files)
    return [
        MemoryDoc(
            ref=ref,
            path=files.layout.relative(ref_path(files.layout, ref)),
            chars=utf16_len(text),
            version=sha256_text(text),
            note=PROTECTED_NOTE if manifest.is_protected(ref) else "",
        )
        for ref, text in _visible_docs(files, manifest)
    ]


def search_memory(files: MemoryStore, query: str, limit: int = 6) -> list[MemoryHit]:
    """Find visible documents containing any of the query's words (case-insensitive).

    Args:
        files: The card's file adapter.
        query: Whitespace-separated words.
        limit: At most this many hits, best first.

    Returns:
        Hits sorted by score (ties keep document order); empty for a blank query.

    Raises:
        MemoryFileError: A document exists but cannot be read, or ``局/`` cannot be
            listed (never "no hits").
    """
    words = query.lower().split()
    if not words or limit <= 0:
        return []
    hits: list[MemoryHit] = []
    for ref, text in _visible_docs(files, load_manifest(files)):
        lowered = text.lower()
        found = [pos for pos in (lowered.find(w) for w in words) if pos >= 0]
        if not found:
            continue
        start = max(0, min(found) - SEARCH_LEAD_CHARS)
        hits.append(MemoryHit(ref, len(found) / len(words), text[start : start + SEARCH_WINDOW_CHARS]))
    hits.sort(key=lambda hit: -hit.score)
    return hits[:limit]
