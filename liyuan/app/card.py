"""A card (卡) as an app holds it: its chats, its cross-session memory, its background sync.

Invariants:

- Card memory is synced in the background after a chat is entered (:meth:`Card.chat`)
  and after one is deleted (:meth:`Card.delete_chat`), as the seed describes; one sync
  per card at a time, extra triggers collapse into one more run.
- Deleting a chat deletes its recap first, then its folder; the next sync forgets only
  what that chat alone supported.
- Every activity line reaches the ``on_activity`` listener and :attr:`Card.activity`;
  none is printed. A listener that raises is logged and ignored.
- Vector memory turned on without its packages is refused when the card opens: a
  :class:`~liyuan.errors.ConfigError` naming the extra to install.
- No chat path leads outside the card: a symlink under ``对话/`` raises
  :class:`~liyuan.errors.UnsafePathError` before anything is read, written or deleted.
- Opening a card removes what an import killed mid-way left (its temporary file and the
  otherwise empty chat folder); an import still running in a live process is left alone.
- Without a side model nothing is sent anywhere: turns are assembled, replies recorded,
  memory files can be read and edited, but no compaction, recap or merge runs. Opening
  such a card says so in one activity line; each turn's verbatim history stays within
  ``MemoryConfig.history_max_chars`` (the oldest whole turns left out, the record says so).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from liyuan.app.activity import Activity, Lane, Listener, refuse_own_wait
from liyuan.app.card_lore import CardLore
from liyuan.app.chat import Chat, ChatDeps
from liyuan.app.pins import PinBook, pin_share
from liyuan.app.vectors import open_vector
from liyuan.card.inputs import OpenBranches
from liyuan.card.layout import CardLayout, validate_chat_id
from liyuan.card.memstore import MemoryStore
from liyuan.card.repair import ManifestRepair
from liyuan.card.resident import ResidentReader
from liyuan.card.sessions import SessionStore
from liyuan.card.sync import CardMemory, MergeStatus, SyncOutcome
from liyuan.card.worker import SyncWorker
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.config import MemoryConfig
from liyuan.context.pins import Pin
from liyuan.errors import ConfigError, MemoryFileError, ModelError, StateError, UnsafePathError
from liyuan.lore.cards import ImportedCard
from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.lore.store import LoreShelf
from liyuan.model import ChatModel, Completion, ModelRequest
from liyuan.runner import Deadline
from liyuan.session.tree import SessionTree
from liyuan.storage.cardstorage import CardStorage, prepare_folder
from liyuan.vector.requires import require_vector_packages

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStores

__all__ = ["Card", "RunOptions"]

_log = logging.getLogger("liyuan.app")

FIRST_SESSION_FILE = "001.jsonl"
ACTIVITY_KEPT = 200


class _NoSideModel:
    """Stands in when no side model is configured: reading and hand edits still work."""

    def complete(self, request: ModelRequest) -> Completion:
        raise ModelError("没有配置旁路模型（side_model）")


@dataclass(frozen=True)
class RunOptions:
    """How a card runs its memory work and stamps what it writes: switches for scripts,
    tests and replays (the defaults are an app's)."""

    background: bool = True
    """``False`` runs the memory work (ingest, compaction, sync) inline, in the calling
    thread, so every effect is there when the call returns (scripts, tests, a replay that
    must be byte-stable)."""
    auto_sync: bool = True
    """``False`` leaves card syncs to the app's own :meth:`Card.sync` calls (an app that syncs
    on its own schedule, or a replay that syncs at set points); by default entering and
    deleting a chat sync in the background, as the seed says (entering: once the chat's
    first turn is assembled, or :data:`~liyuan.card.worker.ENTRY_SYNC_WAIT_S` after)."""
    clock: Clock = system_clock
    """Where time stamps come from (:func:`liyuan.clock.fixed_clock` for a replay)."""
    ids: IdFactory = random_ids
    """Where entry ids come from (:func:`liyuan.clock.counter_ids` for a replay)."""


RUN_SWITCHES = tuple(f.name for f in fields(RunOptions))
"""The options :meth:`Card.open` folds into a :class:`RunOptions`."""


class Card:
    """One card's memory folder and its chats. Open it with :meth:`Card.open`.

    Attributes:
        path: The card folder (``cards/<卡>``).
        config: The memory settings in force.
        side_model: The model that writes summaries, recaps and the handbook, or ``None``.
        activity: The newest activity lines (at most 200), oldest first.

    Options besides the settings (all keyword-only):
        run: How the memory work runs and what stamps it (:class:`RunOptions`: background,
            auto_sync, clock, ids); :meth:`Card.open` also takes each of the four by name.
        storage: Where the card's sessions, memory documents, locks and vector memory are
            kept: a :class:`~liyuan.storage.CardStorage` (default: ``CardStorage.folder(path)``;
            PostgreSQL: ``CardStorage.postgres(dsn, scope=...)``). The card closes it when
            it closes. ``path`` may be left out when the storage has a folder.

    Raises:
        CardIncomplete: A copy into the storage did not finish (the message says how to clear it).
        StorageRefused: The card folder cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, side_model: ChatModel | None = None,
                 config: MemoryConfig | None = None, user_name: str = "你", char_name: str = "",
                 on_activity: Listener | None = None, storage: CardStorage | None = None,
                 run: RunOptions | None = None) -> None:
        if config is not None and not isinstance(config, MemoryConfig):
            raise ConfigError(f"config 应为 MemoryConfig，实际是 {type(config).__name__}")
        if run is not None and not isinstance(run, RunOptions):
            raise ConfigError(f"run 应为 RunOptions，实际是 {type(run).__name__}")
        run = run or RunOptions()
        clock, ids = run.clock, run.ids
        if storage is not None and not isinstance(storage, CardStorage):
            raise ConfigError(f"storage 应为 CardStorage，实际是 {type(storage).__name__}")
        if path is None and (storage is None or storage.path is None):
            raise ConfigError("要给出卡目录：Card.open(路径)，或 storage 带着卡目录")
        if path is not None and storage is not None and storage.path is not None \
                and Path(path).absolute() != storage.path.absolute():
            raise ConfigError(f"卡目录 {path} 和 storage 的 {storage.path} 不是同一个")
        self._storage = storage if storage is not None else CardStorage.folder(path)  # type: ignore[arg-type]
        self.path: Path = Path(path) if path is not None else self._storage.path  # type: ignore[assignment]
        self.config = config or MemoryConfig()
        require_vector_packages(self.config.vector)  # a missing extra is refused here, naming it
        self.side_model = side_model
        self.user_name = user_name
        self.char_name = char_name or self.path.name
        self.activity: deque[Activity] = deque(maxlen=ACTIVITY_KEPT)
        self._listener = on_activity
        self._background = run.background
        self._auto_sync = run.auto_sync
        self._chunk_stores: ChunkStores = self._storage.chunk_stores(clock)
        self._sync_lines: list[str] = []
        """Lines of the sync under way, sent with its outcome when it ends."""
        self._clock = clock
        self._ids = ids
        self._layout = CardLayout(self.path)
        self._sessions: SessionStore = self._storage.sessions
        self._files: MemoryStore = self._storage.memory_store(self._layout, clock=clock, ids=ids)
        self._storage.check_whole(self._files)
        self._lore = LoreShelf(self.path, names=(self.user_name, self.char_name))
        self._card_lore = CardLore(self.path, (self.user_name, self.char_name), self._lore, self._files, self._emit)
        self._pin_book = PinBook(self.path)
        self._chats: dict[str, Chat] = {}
        self._chats_guard = threading.Lock()
        """Makes look-up-or-open one step: two threads entering a chat get one :class:`Chat`."""
        self._unreported: SyncOutcome | None = None
        """Every sync finished since :meth:`sync` last reported, combined (bounded by the chats)."""
        self._outcomes_guard = threading.Lock()
        self._resident = ResidentReader(self._files, self._layout)
        """The resident summary each turn reads (one reader for every chat, re-read when it changed)."""
        self._open = OpenBranches()
        """The open chats' trees, by chat: a recap reads an open chat's branch from it."""
        self._memory: tuple[ChatModel | None, CardMemory] | None = None  # with the side model it was built for
        self._worker = SyncWorker(self._sync_memory, on_outcome=self._synced, on_error=self._sync_failed) \
            if run.background else None
        self._clean_interrupted_imports()
        if side_model is None:  # said once, at open: nothing compacts, recaps or merges
            self._emit(Activity("compact", "没有配置旁路模型（side_model）：不做前情压缩、复盘和合并，"
                                           "sync() 什么也不做；"
                                           f"每轮逐字历史超过 history_max_chars（{self.config.history_max_chars} 字）"
                                           "时从最早的整轮略去，turn.record.history_cut 记着略去了多少"))

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> Card:
        """Open (or create) the card folder. Options are those of :class:`Card`; the four of
        :class:`RunOptions` may also be given by name (``background=False`` ...).

        Raises:
            StorageRefused: The folder cannot be created or written.
        """
        switches = {name: options.pop(name) for name in RUN_SWITCHES if name in options}
        if switches:
            if options.get("run") is not None:
                raise ConfigError(f"{'、'.join(switches)} 和 run= 只能给一种：都放进 RunOptions")
            options["run"] = RunOptions(**switches)
        if path is not None:
            prepare_folder(Path(path))
        return cls(path, **options)

    # -- chats ------------------------------------------------------------------

    def chat(self, chat_id: str, *, user_name: str | None = None, char_name: str | None = None,
             title: str | None = None, greeting: str | None = None) -> Chat:
        """Open a chat (局), creating it on first use; entering it syncs the card in the background.

        Args:
            chat_id: ``^[A-Za-z0-9_-]+$``.
            user_name: The user's character name; only the card's own (given to
                :meth:`open`) is accepted, since recaps and merges use the card's names.
            char_name: The character's name; likewise only the card's own.
            title: The chat's display name, kept as its ``meta.json`` (in its folder, or the session store).
            greeting: The card's opening line, written as the first entry of a new chat;
                default: the imported card's first greeting (``first_mes``), if any.

        Raises:
            ConfigError: An invalid chat id, or names other than the card's.
            UnsafePathError: ``对话/``, the chat's folder or one of its files is a symlink.
        """
        validate_chat_id(chat_id)
        for given, own, what in ((user_name, self.user_name, "user_name"), (char_name, self.char_name, "char_name")):
            if given is not None and given != own:
                raise ConfigError(f"{what}={given!r} 和卡的不同（卡的是 {own!r}）：人物名字在 Card.open(..., "
                                  f"{what}=...) 里给，一张卡的摘要、复盘和合并用同一套名字")
        first_turn: threading.Event | None = None
        with self._chats_guard:
            chat = self._chats.get(chat_id)
            if chat is None:
                first_turn = threading.Event()
                chat = self._open_chat(chat_id, user_name or self.user_name, char_name or self.char_name, greeting,
                                       first_turn)
                self._chats[chat_id] = chat
                self._open.hold(chat_id, chat.tree)
        if title is not None:
            self._sessions.set_meta(chat_id, (json.dumps({"name": title}, ensure_ascii=False) + "\n").encode())
        if self._auto_sync and first_turn is not None and self._worker is not None and self.side_model is not None:
            self._worker.trigger(self.path, after=first_turn)  # once the new chat's first turn is assembled
        elif self._auto_sync:
            self.sync(wait=False)
        return chat

    def import_chat(self, path: str | os.PathLike[str], chat_id: str, *, format: str | None = None,
                    title: str | None = None, speaker: str | None = None, conversation: int = 1) -> Chat:
        """Bring in a chat the user already has (SillyTavern JSONL, OpenAI messages, a transcript).

        The file becomes the new chat's first session: chosen swipes on the main branch,
        the others as rerolls beside them, system and narrator lines kept out of the story.
        The next :meth:`Chat.prepare` continues from its end; the card syncs in the
        background as on entering any chat.

        Args:
            path: The chat file.
            chat_id: The new chat's id (``^[A-Za-z0-9_-]+$``); it must not have sessions yet.
            format: ``sillytavern``, ``openai`` or ``transcript``; ``None`` guesses.
            title: The chat's display name (``meta.json``).
            speaker: Transcripts only: which speaker is the user.
            conversation: OpenAI files holding several conversations: which one (1-based).

        Raises:
            ConfigError: An invalid chat id.
            StateError: The chat exists already.
            ChatImportError: The file cannot be imported (its line and field named); nothing is written.
        """
        from liyuan.session.imports import ChatReader, import_chat

        validate_chat_id(chat_id)
        if chat_id in self._chats or self._sessions.names(chat_id):
            raise StateError(f"局 {chat_id} 已经有会话了：导入只建新的一局")
        session_id = f"{chat_id}-{Path(FIRST_SESSION_FILE).stem}"
        self._sessions.import_into(chat_id, FIRST_SESSION_FILE, lambda target: import_chat(
            ChatReader(path, format, user_name=speaker, conversation=conversation), target, session_id=session_id,
            clock=self._clock, ids=self._ids))
        return self.chat(chat_id, title=title)

    def chat_ids(self) -> list[str]:
        """The card's chats, sorted (in files: a symlink in ``对话/`` is no chat).

        Raises:
            UnsafePathError: ``对话/`` itself is a symlink.
        """
        return self._sessions.chat_ids()

    def reopen(self, chat_id: str) -> Chat:
        """Open a chat again from its stored sessions: after a
        :class:`~liyuan.errors.SessionConflictError` (another app server wrote to it), this
        chat's next turn sees what the other wrote. The old :class:`Chat` is closed."""
        validate_chat_id(chat_id)
        with self._chats_guard:
            chat = self._chats.pop(chat_id, None)
            self._open.drop(chat_id)
        if chat is not None:
            chat.close()
        return self.chat(chat_id)

    def delete_chat(self, chat_id: str) -> bool:
        """Delete a chat: its recap, then its folder; the card then forgets what it alone supported.

        Returns:
            False when the chat did not exist.

        Raises:
            ConfigError: An invalid chat id.
            UnsafePathError: ``对话/`` or the chat's folder is a symlink (nothing is deleted).
        """
        validate_chat_id(chat_id)
        with self._chats_guard:
            chat = self._chats.pop(chat_id, None)
            self._open.drop(chat_id)
        if chat is not None:
            chat.close()
        deleted = self.memory.delete_chat(chat_id)
        self._chunk_stores.drop(chat_id)  # a SQLite store went with the folder
        self._card_lore.forget_chat(chat_id)
        self._forget_pins(chat_id)
        if self._auto_sync:
            self.sync(wait=False)
        return deleted

    # -- the character card and its lore book (the work: liyuan.app.card_lore) -----------

    def import_card(self, path: str | os.PathLike[str], *, replace: bool = False) -> ImportedCard:
        """Bring in a character card (V3/V2/V1 as JSON, PNG or CHARX) or a lore book
        (``lorebook_v3``, SillyTavern World Info); see :mod:`liyuan.lore.cards`.

        A card is kept whole as ``角色卡.json`` (unknown fields too) and gives new chats
        their greeting; its ``character_book`` (or the lore book) becomes ``设定集.yaml``.
        What became of each field is in the result's ``notes`` (one activity line per field).

        Args:
            path: The file.
            replace: Replace a lore book the card already has (it is refused otherwise).

        Returns:
            What was read (name, greetings, lore book, the JSON).

        Raises:
            CardImportError: The file cannot be imported (the message says why); nothing is written.
            StateError: The card has a lore book already and ``replace`` is False; nothing is written.
        """
        return self._card_lore.import_card(path, replace=replace)

    @property
    def lore(self) -> LoreBook | None:
        """The card's lore book as stored (``设定集.yaml``), or ``None``.

        Raises:
            LoreError: The file does not read (the message names the entry).
        """
        return self._card_lore.lore

    def save_lore(self, book: LoreBook) -> None:
        """Replace the card's lore book (written atomically; the next turn uses it)."""
        self._card_lore.save_lore(book)

    def propose_lore(self, *, min_sources: int = 2) -> list[LoreEntry]:
        """Lore entries learnt from the handbook's stable lines, each with its source chats.

        Nothing is written: pass the ones you want to :meth:`adopt_lore`. Deleting a chat
        later removes an adopted entry that only that chat supported.
        """
        return self._card_lore.propose_lore(min_sources=min_sources)

    def adopt_lore(self, entries: list[LoreEntry]) -> None:
        """Add proposed entries to the lore book (a learnt entry of the same title is replaced,
        an entry a person wrote is kept)."""
        self._card_lore.adopt_lore(entries)

    def export_card(self, path: str | os.PathLike[str], *, spec: str = "chara_card_v2") -> Path:
        """Write the card with its lore book as it is now, in the form SillyTavern reads
        (:mod:`liyuan.lore.export`): JSON, or PNG when ``path`` ends in ``.png`` (``tEXt``
        ``chara``, and ``ccv3`` as well for V3; the picture is a 1×1 placeholder).

        Args:
            path: Where to write (replaced atomically).
            spec: ``chara_card_v2`` or ``chara_card_v3``.

        Raises:
            ConfigError: An unknown ``spec``.
            LoreError: The lore book does not read.
        """
        return self._card_lore.export_card(path, spec=spec)

    def export_lore(self, path: str | os.PathLike[str]) -> Path:
        """Write the lore book as a SillyTavern World Info file (replaced atomically).

        Raises:
            StateError: The card has no lore book.
        """
        return self._card_lore.export_lore(path)

    def greetings(self) -> tuple[str, ...]:
        """The imported card's greetings (``first_mes``, then the alternates); empty if none."""
        return self._card_lore.greetings()

    # -- pins -------------------------------------------------------------------------

    def pin(self, text: str) -> Pin:
        """Keep ``text`` verbatim in every later turn of every chat of the card.

        Raises:
            ConfigError: Empty, or some chat's pins would pass their share with it: refused whole.
        """
        return self._pin_book.add(text, chat_id=None, share_chars=pin_share(self.config))

    def unpin(self, pin_id: str) -> bool:
        """Remove the card's pin ``pin_id``; False when there is no such pin.

        Raises:
            StateError: ``pin_id`` is a chat's pin (``chat.unpin`` removes it).
        """
        return self._pin_book.remove(pin_id, chat_id=None)

    def pins(self) -> tuple[Pin, ...]:
        """The card's own pins (a chat's pins: :meth:`liyuan.Chat.pins`)."""
        return self._pin_book.carried(None)

    # -- card memory --------------------------------------------------------------

    @property
    def memory(self) -> CardMemory:
        """The card's memory: read, list, search and hand-edit it (the hard path).

        One object per card (every turn reads the resident summary through it), built
        anew only when :attr:`side_model` has been replaced."""
        if self._memory is None or self._memory[0] is not self.side_model:
            self._memory = (self.side_model, self._new_memory(self.side_model or _NoSideModel()))
        return self._memory[1]

    def repair_manifest(self) -> ManifestRepair:
        """Rebuild a damaged manifest (the call a damaged-manifest error names), then sync.

        The damaged file is kept in ``.history/``; what cannot be read back is filled in
        the most cautious way (see :func:`liyuan.card.repair.repair_manifest`). A healthy
        or missing manifest is left alone. The card syncs again in the background.

        Raises:
            UnsafePathError: A memory path is a symlink or leads outside the card.
        """
        repair = self.memory.repair_manifest()
        self.sync(wait=False)
        return repair

    def resident_summary(self) -> str | None:
        """The resident summary as stored (each turn sends it fitted to the budget).

        Read again only when its stamp changed (files: the inode, size or modification
        time, which an atomic rewrite, a hand edit or a symlink put in its place all
        change), so a turn does not pay for a file read.
        """
        return self._resident.read()

    def sync(self, *, wait: bool = True, timeout: float | None = None) -> SyncOutcome | None:
        """Recap changed chats, merge, forget; with ``wait``, say what the card's syncs did.

        With ``wait`` (the default) it returns once the card is idle, with every sync that
        finished since the last call that returned an outcome, combined: background syncs
        (after entering or deleting a chat) included, so nothing they did goes unreported.
        A background sync that stopped on an error is listed in the outcome's ``errors``
        (and was an ``error`` activity line when it happened). Without a side model it
        does nothing and returns ``None``; it also returns ``None`` when ``wait`` is False
        or the timeout ran out.
        """
        if self.side_model is None:
            return None
        refuse_own_wait(wait and self._worker is not None and self._worker.on_own_thread(), "等跨局同步做完")
        if self._worker is None:
            memory = self._sync_memory(self.path)
            assert memory is not None
            self._synced(self.path, memory.sync())
        else:
            self._worker.release()  # asked for now: a sync waiting for a chat's first turn starts
            self._worker.trigger(self.path)
            if not wait or not self._worker.wait_idle(timeout):
                return None
        with self._outcomes_guard:
            unreported, self._unreported = self._unreported, None
        return unreported or SyncOutcome()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for every chat's background work and the card's sync; False on timeout.

        ``timeout`` bounds the whole wait, however many chats are open.
        """
        deadline = Deadline(timeout)
        with self._chats_guard:
            chats = list(self._chats.values())
        refuse_own_wait(any(chat._on_lane() for chat in chats)
                        or (self._worker is not None and self._worker.on_own_thread()), "等卡的后台任务或关闭卡")
        done = True
        for chat in chats:
            done = chat.flush(deadline.left()) and done
        if self._worker is not None:
            self._worker.release()
            done = self._worker.wait_idle(deadline.left()) and done
        return done

    def close(self, timeout: float | None = None) -> bool:
        """Finish the background work, stop the worker threads (``timeout`` bounds it all)
        and close the storage (its connections; a later call on it opens them again)."""
        deadline = Deadline(timeout)
        done = self.flush(timeout)
        with self._chats_guard:
            chats = list(self._chats.values())
            self._chats.clear()
            for chat in chats:
                self._open.drop(chat.id)
        for chat in chats:
            done = chat.close(deadline.left()) and done
        if done:  # work still running would find its connections gone
            self._storage.close()
        return done

    def __enter__(self) -> Card:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # Bounded: a side model that never returns must not hang the end of the block.
        if not self.close(self.config.background_wait_s):
            self._emit(Activity("error", f"关闭时后台任务 {self.config.background_wait_s:g} 秒还没做完，"
                                         "不再等它（旁路模型可能卡住了）"))

    # -- internals ------------------------------------------------------------------

    def _vector_line(self, chat_id: str, line: str) -> None:
        self._emit(Activity("vector", line, chat_id))

    def _forget_pins(self, chat_id: str) -> None:
        try:
            gone = self._pin_book.forget_chat(chat_id)
        except (MemoryFileError, UnsafePathError) as exc:
            self._emit(Activity("error", f"删掉局 {chat_id} 后没能更新置顶：{exc}"))
            return
        if gone:
            self._emit(Activity("lore", f"局 {chat_id} 删掉了，它的 {len(gone)} 条置顶也删了"))

    def _emit(self, activity: Activity) -> None:
        self.activity.append(activity)
        if self._listener is not None:
            try:
                self._listener(activity)
            except Exception:  # the app's listener must not break the memory's work
                _log.exception("on_activity 回调出错（已忽略）")

    def _new_memory(self, model: ChatModel, on_line: Callable[[str], None] | None = None) -> CardMemory:
        return CardMemory(self.path, model, self.config.sync_settings(self.user_name, self.char_name),
                          clock=self._clock, ids=self._ids, loaded=self._open, sessions=self._sessions,
                          files=self._files, on_activity=on_line or (lambda line: self._emit(Activity("sync", line))))

    def _sync_memory(self, _key: Path) -> CardMemory | None:
        # A sync's lines wait for its outcome (one sync per card at a time), then go out carrying it.
        return self._new_memory(self.side_model, self._sync_lines.append) if self.side_model is not None else None

    def _flush_sync_lines(self, outcome: SyncOutcome | None) -> None:
        lines, self._sync_lines[:] = list(self._sync_lines), []
        for line in lines:
            self._emit(Activity("sync", line, outcome=outcome))

    def _synced(self, _key: Path, outcome: SyncOutcome) -> None:
        self._flush_sync_lines(outcome)
        with self._outcomes_guard:
            self._unreported = outcome if self._unreported is None else _combine([self._unreported, outcome])

    def _sync_failed(self, key: Path, exc: BaseException) -> None:
        self._flush_sync_lines(None)
        self._emit(Activity("error", f"跨局记忆同步出错：{type(exc).__name__}: {exc}"))
        # Reported by the next sync(wait=True) too: an empty outcome would read "nothing to do".
        self._synced(key, SyncOutcome(errors=[f"{type(exc).__name__}: {exc}"]))

    def _clean_interrupted_imports(self) -> None:
        """Remove what imports killed mid-way left (see :meth:`FileSessions.clean_dead_imports`)."""
        removed = self._sessions.clean_dead_imports()
        if removed:
            self._emit(Activity("sync", f"清理了 {removed} 个导入中断（进程被杀）时留下的临时文件"))

    def _open_chat(self, chat_id: str, user_name: str, char_name: str, greeting: str | None,
                   first_turn: threading.Event) -> Chat:
        existing = self._sessions.names(chat_id)
        name = existing[-1] if existing else FIRST_SESSION_FILE
        log = self._sessions.log(chat_id, name, fsync=self.config.durability == "entry")  # a symlink: refused
        # Opened before the session file is read: its vectors and keyword index load on
        # their own threads meanwhile, so a long chat's first recall waits less (issue 36).
        vector = open_vector(chat_id, self.config.vector, self._chunk_stores, say=partial(self._vector_line, chat_id),
                             background=self._background) if self.config.vector.enabled else None
        tree = SessionTree(log=log, session_id=f"{chat_id}-{Path(name).stem}", clock=self._clock, ids=self._ids)
        if not existing and greeting is None:
            greeting = next(iter(self.greetings()), None)  # the imported card's first_mes
        if not existing and greeting:
            tree.append_message("assistant", greeting, greeting=True)
        lane = Lane(f"liyuan-{chat_id}", self._emit, background=self._background, chat_id=chat_id)
        deps = ChatDeps(user_name, char_name, self._resident, self._emit, self._lore, self._pin_book, self._clock,
                        first_turn)
        return Chat(chat_id, tree, card=deps, config=self.config, side_model=self.side_model, lane=lane, vector=vector)


def _combine(outcomes: list[SyncOutcome]) -> SyncOutcome:
    """Several syncs as one: every chat recapped, failed or forgotten; the last real merge status."""

    def union(field: str) -> list[str]:  # in order of first appearance
        return list(dict.fromkeys(chat for outcome in outcomes for chat in getattr(outcome, field)))

    merged: MergeStatus = next((o.merged for o in reversed(outcomes) if o.merged != "no-change"), "no-change")
    return SyncOutcome(union("recapped"), union("failed"), merged, union("forgotten"),
                       [error for outcome in outcomes for error in outcome.errors])
