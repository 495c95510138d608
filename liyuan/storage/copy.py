"""Moving a card between backends: its sessions, chat names and memory byte for byte, its
vector memory chunk by chunk.

:func:`copy_card` copies a whole card from one :class:`CardStorage` to another: from the
card folder into PostgreSQL when an app outgrows one machine, and back out to a folder to
read, edit or archive it by hand. :func:`copy_sessions`, :func:`copy_memory` and
:func:`copy_chunks` are its parts. Session and memory bytes arrive exactly as they left (a
damaged session line, a torn last write, a recap that is not UTF-8, the ``.history/``
copies), so copying there and back gives the same files. Chunks arrive with their vectors
and version links under ids of the target's own, so recall ranks them as before (a
SQLite file is not byte-stable anyway).

One thing may be re-taken on arrival: the manifest records, per chat, the fingerprint of
the sessions its recap was made from, and a fingerprint is the backend's own (files: size
and modification time; PostgreSQL: size and header). With ``restamp=True`` (the default)
a chat whose recap was up to date in the source gets the target's fingerprint, so the
first sync after a move pays for no recap; with ``restamp=False`` the copy is byte for byte
throughout and that sync recaps every chat once.

Invariants: a session, a memory document or a chat's chunks the target already has are
never overwritten (the copy stops before writing anything); the source's memory is read
under its write lock, the target's written under its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liyuan.card.manifest import load_manifest, save_manifest
from liyuan.card.memstore import MemoryStore
from liyuan.card.sessions import SessionStore
from liyuan.errors import ManifestError, SessionConflictError, StateError
from liyuan.storage.cardstorage import INCOMPLETE_MARK, CardStorage

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStore

__all__ = ["CardCopy", "copy_card", "copy_chunks", "copy_memory", "copy_sessions"]


def _chunks_of(storage: CardStorage, chat_id: str) -> ChunkStore | None:
    """The chat's chunk store when it has any chunks or queued turns (none is created here)."""
    stores = storage.chunk_stores()
    if not stores.has(chat_id):
        return None
    store = stores.open(chat_id)
    return store if store.count() or store.pending() else None


@dataclass(frozen=True)
class CardCopy:
    """What :func:`copy_card` copied."""

    sessions: int
    documents: int
    chunks: int
    """Vector-memory chunks copied (over every chat)."""
    restamped: list[str]
    """Chats whose recap was up to date and got the target's fingerprint (``restamp=True``)."""
    note: str = ""
    """Why nothing was restamped although asked (the manifest is damaged: it was copied as it is)."""


def copy_card(source: CardStorage, target: CardStorage, *, restamp: bool = True) -> CardCopy:
    """Copy a whole card (sessions, chat names, memory documents with ``.history/``, vector
    memory); see the module.

    The target is marked incomplete before the first write and the mark is removed after
    the last: a copy killed half-way leaves a card that refuses to open
    (:class:`~liyuan.errors.CardIncomplete`) until :meth:`CardStorage.clear` empties it.

    Raises:
        CardIncomplete: The target holds a copy that did not finish (nothing is copied).
        SessionConflictError: The target has sessions of one of the chats already (nothing is copied).
        StateError: The target has memory documents, or chunks of one of the chats, already
            (nothing is copied).
        StorageError: Something cannot be read or written.
    """
    target.check_whole()
    chats = source.sessions.chat_ids()
    taken = [chat_id for chat_id in chats if target.sessions.names(chat_id)]
    if taken:
        raise SessionConflictError(f"目标里已经有这些局的会话：{'、'.join(taken)}：不覆盖，什么都没有复制")
    if target.memory.snapshot():
        raise StateError("目标里已经有记忆文档：不覆盖，什么都没有复制")
    vectors = {chat_id: store for chat_id in chats if (store := _chunks_of(source, chat_id)) is not None}
    if any(_chunks_of(target, chat_id) is not None for chat_id in vectors):
        raise StateError("目标里已经有这些局的向量记忆：不覆盖，什么都没有复制")
    marks = {chat_id: source.sessions.mark(chat_id) for chat_id in chats}
    incomplete = target.memory.layout.memory_dir / INCOMPLETE_MARK
    target.memory.write_text(incomplete, "复制进行中：没有做完之前这张卡不能打开\n")
    sessions = copy_sessions(source.sessions, target.sessions, chats=chats)
    documents = copy_memory(source.memory, target.memory)
    chunks = 0
    for chat_id, store in vectors.items():
        chunks += copy_chunks(store, target.chunk_stores().open(chat_id))
    restamped: list[str] = []
    note = ""
    if restamp:
        try:
            with target.memory.locks.write:
                manifest = load_manifest(target.memory)
                for chat_id, record in manifest.recaps.items():
                    # Up to date with the sessions as copied: the mark taken before the copy,
                    # and the source has not moved since (a live card may grow meanwhile).
                    mark = marks.get(chat_id)
                    if mark and record.source_mark == mark == source.sessions.mark(chat_id):
                        record.source_mark = target.sessions.mark(chat_id)
                        restamped.append(chat_id)
                if restamped:
                    save_manifest(target.memory, manifest)
        except ManifestError as exc:
            note = f"清单已损坏，没有换指纹（修好清单后第一次同步会重做复盘）：{exc}"
    target.memory.delete(incomplete)
    return CardCopy(sessions, documents, chunks, sorted(restamped), note)


def copy_memory(source: MemoryStore, target: MemoryStore) -> int:
    """Copy every memory document (``.history/`` included) byte for byte; how many.

    Raises:
        StateError: The target has documents already (nothing is copied).
    """
    with source.locks.write:
        documents = {name: data for name, data in source.snapshot().items() if name != INCOMPLETE_MARK}
    with target.locks.write:
        present = {name: data for name, data in target.snapshot().items() if name != INCOMPLETE_MARK}
        if present:
            raise StateError(f"目标里已经有 {len(present)} 份记忆文档：不覆盖，记忆没有复制")
        target.restore(documents)
    return len(documents)


def copy_sessions(source: SessionStore, target: SessionStore, *, chats: Iterable[str] | None = None) -> int:
    """Copy the sessions of ``chats`` (default: every chat of ``source``) to ``target``, and
    each chat's meta (its display name) where the target has none.

    Returns:
        How many sessions were copied.

    Raises:
        SessionConflictError: ``target`` has one of the sessions already (the sessions
            before it were copied; nothing of it or after it was).
        TreeError: A session cannot be read or written.
    """
    copied = 0
    for chat_id in (list(chats) if chats is not None else source.chat_ids()):
        taken = set(target.names(chat_id))
        for name in source.names(chat_id):
            if name in taken:
                raise SessionConflictError(f"目标里已经有会话 {chat_id}/{name}：不覆盖，复制停在这里")
            data = source.raw(chat_id, name)
            if data is None:
                continue  # gone since the listing
            target.log(chat_id, name).create(data)
            copied += 1
        meta = source.meta(chat_id)
        if meta is not None and target.meta(chat_id) is None:  # the target's own name is kept
            target.set_meta(chat_id, meta)
    return copied


def copy_chunks(source: ChunkStore, target: ChunkStore) -> int:
    """Copy one chat's vector memory: every chunk with its vector, oldest first, the links
    between a chunk and the version it extends, and the turns queued for ingest. Ids and
    timestamps are the target's own; recall ranks the copy as it ranked the original.
    A chunk whose vector is unreadable arrives without one and is embedded again later.
    How many chunks were copied.

    Raises:
        StateError: The target has chunks already (nothing is copied).
    """
    import numpy as np

    from liyuan.vector.checked import UNEMBEDDED
    from liyuan.vector.chunkstore import NewChunk

    if target.count():
        raise StateError("目标里这一局已经有向量记忆：不覆盖，没有复制")
    snapshot = source.snapshot()
    vectors = {snapshot.chunks[row].id: matrix[i] for rows, matrix in snapshot.matrices.values()
               for i, row in enumerate(rows.tolist())}
    chunks = source.chunks()
    empty = np.zeros(0, dtype=np.float32)
    copied: dict[str, str] = {}
    for chunk in chunks:
        vector = vectors.get(chunk.id)
        embedded = vector is not None and vector.size > 0
        parent = copied.get(chunk.parent) if chunk.parent is not None else None
        added = target.add([NewChunk(chunk.store, chunk.text, vector if embedded else empty,  # type: ignore[arg-type]
                                     chunk.embedder if embedded else UNEMBEDDED, chunk.source, chunk.title,
                                     chunk.node_id, parent, chunk.merge_count)], max_chunks=len(chunks) + 1)
        if added:
            copied[chunk.id] = added[0]
    for _seq, node_id, text in source.pending():
        target.next_turn((node_id, text))
    return len(copied)
