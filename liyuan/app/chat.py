"""One chat (局) as an app holds it: prepare a turn, record the reply, branch.

Invariants:

- The session tree only grows: :meth:`Chat.prepare` appends the user's words,
  :meth:`Chat.record` the reply (and the ledger snapshot, when given); a reroll or rewind
  only moves the leaf, so the next append forks a new branch.
- :meth:`Chat.record` returns as soon as the reply is on disk; ingest and compaction then
  run on the chat's background lane, which a roleplay :meth:`Chat.prepare` does not wait
  for: a story summary lands while its covered range is still on the branch
  (:func:`liyuan.story.compact.covered_range_holds`), and one ready mid-turn is held and
  lands right after the reply (never between a user's words and their reply). An
  agent-mode :meth:`Chat.prepare` and :meth:`Chat.compact_now` still wait for the lane.
- A closed chat (its card closed, or the chat deleted) refuses every turn before
  writing anything; :meth:`liyuan.Card.chat` opens it afresh.
- A failing side model never raises out of these methods: the outcome is an activity
  line (and an ``rp-compact-failed`` entry the backoff counts).
- A side model that never returns hangs no call: one that waits for the lane waits at
  most ``MemoryConfig.background_wait_s`` (one ``error`` line), and later calls do not
  wait again until the lane has drained.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from liyuan.app.activity import Activity, Lane, Outcome, refuse_own_wait
from liyuan.app.edits import has_revisions, resident_for_turn, resident_withheld, retract_in_vectors, revise
from liyuan.app.pins import PinBook, pin_share
from liyuan.app.recall import recall_with_trace
from liyuan.app.turn import Turn
from liyuan.card.resident import ResidentReader
from liyuan.clock import Clock, system_clock
from liyuan.compaction import CompactionOutcome, HeldLandings
from liyuan.config import MemoryConfig
from liyuan.context.assemble import prepare_turn
from liyuan.context.inputs import AppBlocks
from liyuan.context.pins import Pin, over_share
from liyuan.discussion.compact import run_discussion_compaction
from liyuan.discussion.messages import agent_history, as_chat_messages
from liyuan.errors import ConfigError, MemoryFileError, StateError, UnsafePathError
from liyuan.lore.match import LoreIndex
from liyuan.lore.store import LoreShelf
from liyuan.model import ChatModel, Usage, usage_fields
from liyuan.runner import Job
from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry, awaits_reply
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger, format_roster, format_state, latest_state_entry
from liyuan.session.tree import SessionTree, custom_entry, message_entry
from liyuan.story.compact import CompactionPlan, compact_now, run_compaction
from liyuan.story.history import story_tail
from liyuan.story.settle import settle_check
from liyuan.vector.recall import bounded_archive, branch_ids_of, ingest_for_turn

if TYPE_CHECKING:
    from liyuan.vector.memory import VectorMemory

__all__ = ["Chat", "ChatDeps", "Mode"]

Mode = Literal["roleplay", "agent"]
_O = TypeVar("_O", bound=Outcome)


@dataclass(frozen=True)
class ChatDeps:
    """What a chat takes from the card that opens it: names, and readers of the layers below
    (nothing of the card itself: no chat calls back into its card)."""

    user_name: str
    char_name: str
    resident: ResidentReader
    """The card's resident summary, and whether an edit of this chat holds it back."""
    emit: Callable[[Activity], None]
    """The card's activity listener (it only reports)."""
    lore: LoreShelf | None = None
    pins: PinBook | None = None
    clock: Clock = system_clock
    first_turn: threading.Event | None = None
    """Set once the chat's first turn is assembled (or it closes): the sync the card starts
    on entering the chat waits for it, so the two do not share the first turn's CPU."""


class Chat:
    """One chat of a card. Get it from :meth:`liyuan.Card.chat`; do not build it yourself.

    Attributes:
        id: The chat id (``^[A-Za-z0-9_-]+$``).
        tree: The session tree (read it freely; append only through this object).
        user_name: The user's character name, used in summaries.
        char_name: The card character's name, used in summaries.
    """

    def __init__(self, chat_id: str, tree: SessionTree, *, card: ChatDeps, config: MemoryConfig,
                 side_model: ChatModel | None, lane: Lane, vector: VectorMemory | None) -> None:
        self.id = chat_id
        self.tree = tree
        self.user_name = card.user_name
        self.char_name = card.char_name
        self._config = config
        self._model = side_model
        self._lane = lane
        self._resident = card.resident  # a reader of the memory layer: the summary, and whether an edit holds it
        self._emit = card.emit
        self.vector = vector
        """The chat's vector memory, or ``None`` when it is off."""
        self._lore, self._pin_book, self._clock = card.lore, card.pins, card.clock
        self._first_turn = card.first_turn
        self._closed = False
        self._said_cut = False
        self._said_pins_over = False
        self._stuck: Job[None] | None = None
        self._held = HeldLandings()  # summaries ready mid-turn, guarded by the tree's lock

    # -- a turn -----------------------------------------------------------------

    def prepare(self, user_text: str, *, ledger: Ledger | None = None, roster: str | None = None,
                lore_index: str = "", extra: Sequence[str] = (), mode: Mode = "roleplay") -> Turn:
        """Append the user's words and assemble the messages for the reply.

        Args:
            user_text: What the user typed.
            ledger: The world state to show (【世界状态】); default: the latest snapshot
                recorded on the branch.
            roster: The 【登场名录】 text; default: rendered from the ledger.
            lore_index: Titles for 【设定集索引】 the app built itself; empty (the default):
                the card's lore book gives them (and the activated entries, 【相关设定】).
            extra: Further complete blocks for the tail (author's note ...).
            mode: ``agent`` for an agent-mode discussion turn (no story memory; the
                discussion summary and history instead).

        Raises:
            ConfigError: Empty text or an unknown mode.
            StateError: The chat is closed.
        """
        if not user_text.strip():
            raise ConfigError("用户消息不能为空")
        if mode not in ("roleplay", "agent"):
            raise ConfigError(f"mode 只能是 roleplay 或 agent，实际是 {mode!r}")
        self._check_open()
        fields = {"mode": "agent"} if mode == "agent" else {}
        if fields:
            self._drain()  # a discussion summary lands only on the leaf it was planned on
        with self.tree.lock:
            self._land_held()  # a summary ready after the last reply goes before these words
            entry = self.tree.append_message("user", user_text, **fields)
        if mode == "agent":
            self._turn_assembled()
            return Turn(as_chat_messages(agent_history(self.tree.branch())), user_text, entry)
        return self._assemble(entry, user_text, ledger=ledger, roster=roster, lore_index=lore_index, extra=extra,
                              appended=True)

    def preview(self, user_text: str, *, ledger: Ledger | None = None, roster: str | None = None,
                lore_index: str = "", extra: Sequence[str] = ()) -> Turn:
        """The turn :meth:`prepare` would assemble for these words, without writing anything.

        For an app's prompt inspector or token counter: the same blocks, budget and recall
        as :meth:`prepare`, but the words stay off the tree (nothing is recorded).

        Raises:
            ConfigError: Empty text.
            StateError: The chat is closed.
        """
        if not user_text.strip():
            raise ConfigError("用户消息不能为空")
        self._check_open()
        return self._assemble(None, user_text, ledger=ledger, roster=roster, lore_index=lore_index, extra=extra)

    def record(self, reply: str, *, usage: Usage | Mapping[str, Any] | None = None,
               ledger: Ledger | None = None, thinking: str = "") -> Entry:
        """Append the role-play model's reply; memory work follows in the background.

        Args:
            reply: The reply text as shown to the user.
            usage: What the endpoint reported for the request (agent mode triggers on it).
            ledger: The world state after this turn (the scribe's snapshot), if the app keeps one.
            thinking: Reasoning text to keep beside the reply (never sent back).

        Returns:
            The reply's entry.

        Raises:
            StateError: No user message waits for a reply (call :meth:`prepare` first),
                or the chat is closed.
        """
        self._check_open()
        with self.tree.lock:
            leaf = self.tree.get(self.tree.leaf_id) if self.tree.leaf_id else None
            if leaf is None or not awaits_reply(leaf):
                raise StateError("没有等待回复的用户消息：先调用 prepare()，或 reroll() 重来这一轮")
            agent = leaf.body.get("mode") == "agent"
            fields: dict[str, Any] = {"mode": "agent"} if agent else {}
            if (counts := usage_fields(usage)) is not None:
                fields["usage"] = counts
            if thinking:
                fields["thinking"] = thinking
            items = [message_entry("assistant", reply, **fields)]
            if ledger is not None:
                items.append(custom_entry(STATE_ENTRY_TYPE, ledger.to_dict()))
            entry = self.tree.extend(items)[0]  # the reply and its ledger: one write, both or neither
            self._land_held()  # a summary that was ready mid-turn follows the reply at once
            if self._config.durability == "turn":
                self.tree.sync()  # the turn's one fsync: its user line, reply and ledger (and a held summary)
        if agent:
            if self._config.discussion_window and self._model is not None:
                self._lane.submit(self._compact_discussion)
            return entry
        if self.vector is not None:
            branch_ids = branch_ids_of(self.tree.branch())
            vector = self.vector
            self._lane.submit(lambda: self._ingest(vector, entry, branch_ids))
        if self._model is not None and self._config.every_n_turns > 0:
            self._lane.submit(self._compact)
        return entry

    def record_tool(self, name: str, args: Mapping[str, Any], result: str) -> Entry:
        """Agent mode: record one tool call and its receipt (before the final :meth:`record`)."""
        self._check_open()
        with self.tree.lock:
            self.tree.append_message("assistant", "", toolCalls=[{"name": name, "args": dict(args)}], mode="agent")
            return self.tree.append_message("toolResult", result, toolName=name, mode="agent")

    # -- branches ---------------------------------------------------------------

    def reroll(self, *, ledger: Ledger | None = None, roster: str | None = None, lore_index: str = "",
               extra: Sequence[str] = ()) -> Turn:
        """Answer the last user message again: the next :meth:`record` forks a sibling reply.

        Raises:
            StateError: The branch has no user message yet, or the chat is closed.
        """
        self._check_open()
        with self.tree.lock:
            branch = self.tree.branch()
            user = next((e for e in reversed(branch) if e.type == "message" and e.role == "user"), None)
            if user is None:
                raise StateError("这一局还没有可以重来的一轮")
            self.tree.navigate(user.id)
        return self._assemble(user, user.text, ledger=ledger, roster=roster, lore_index=lore_index, extra=extra)

    def rewind(self, entry_id: str | None) -> None:
        """Go back to ``entry_id`` (``None``: before the first entry); the next append forks there.

        Raises:
            TreeError: No such entry.
        """
        self.tree.navigate(entry_id)

    def edit(self, entry_id: str, text: str) -> Entry:
        """Change an earlier message's text in place; every later message stays.

        Append-only (an ``rp-edit`` entry; the old text stays on record). What was built
        from the old text is taken back: see :mod:`liyuan.app.edits`. Returns the edit entry.

        Raises:
            ConfigError: Empty or unchanged text.  TreeError: No such message on the branch.
            StateError: A turn waits for its reply, not a story message, deleted, or the chat is closed.
        """
        return self._revise(entry_id, text)

    def delete(self, entry_id: str) -> Entry:
        """Take an earlier message out of the story; every later message stays (an ``rp-delete``
        entry; raises as :meth:`edit`). Returns the deletion entry."""
        return self._revise(entry_id, None)

    def _revise(self, entry_id: str, text: str | None) -> Entry:
        self._check_open()
        with self.tree.lock:
            change = revise(self.tree, entry_id, text)
            if self._config.durability == "turn":
                self.tree.sync()
        self._emit(Activity("compact", change.line(), self.id))
        if (vector := self.vector) is not None:
            self._lane.submit(lambda: retract_in_vectors(vector, change, self._line("vector")))
        if self._model is not None and self._config.every_n_turns > 0:
            self._lane.submit(self._rewrite)
        return change.entry

    def branch(self) -> BranchView:
        """The current branch, root to leaf."""
        return self.tree.branch()

    @property
    def summary(self) -> str | None:
        """The relay summary in force on the current branch, if any."""
        active = story_tail(self.tree.branch())[1]  # edits applied, stale summaries left out
        return active.summary if active else None

    # -- pins -------------------------------------------------------------------

    def pin(self, text: str) -> Pin:
        """Keep ``text`` verbatim in every later turn of this chat (first in 【相关设定】).

        Raises:
            ConfigError: Empty, or the chat's pins (the card's included) would pass their
                share (``budget_chars × pin_share``): refused whole, nothing written.
            StateError: The chat was opened without a card.
        """
        return self._book().add(text, chat_id=self.id, share_chars=pin_share(self._config))

    def unpin(self, pin_id: str) -> bool:
        """Remove this chat's pin ``pin_id``; False when there is no such pin.

        Raises:
            StateError: ``pin_id`` is the card's or another chat's pin.
        """
        return self._book().remove(pin_id, chat_id=self.id)

    def pins(self) -> tuple[Pin, ...]:
        """The pins this chat's turns carry: the card's, then the chat's own."""
        return self._book().carried(self.id)

    def _book(self) -> PinBook:
        if self._pin_book is None:
            raise StateError("这一局不是从卡打开的，没有置顶可用")
        return self._pin_book

    def _turn_pins(self) -> tuple[Pin, ...]:
        """The pins for a turn; a file that does not read is said, and the turn goes on without them."""
        if self._pin_book is None:
            return ()
        try:
            pins = self._pin_book.carried(self.id)
        except (MemoryFileError, UnsafePathError) as exc:
            self._emit(Activity("error", f"置顶读不了，这一轮不带置顶：{exc}", self.id))
            return ()
        over = over_share(pins, pin_share(self._config))
        if over and not self._said_pins_over:  # the settings shrank after they were made: sent whole, said once
            self._said_pins_over = True
            self._emit(Activity("error", f"置顶比现在的份额多 {over} 字（设置改小了）：照样整条送出，"
                                         "请 unpin 一些或调大 pin_share", self.id))
        return pins

    # -- memory work --------------------------------------------------------------

    def compact_now(self) -> CompactionOutcome[CompactionPlan]:
        """Manual ``/compact``: no waiting for the period, a 500-character floor.

        Raises:
            StateError: No side model is configured, or the chat is closed.
        """
        if self._model is None:
            raise StateError("没有配置旁路模型（side_model），无法压缩")
        self._check_open()
        busy = not self._drain()  # a stuck compaction is still under way
        model, settings = self._model, self._config.compaction(self.user_name, self.char_name)
        return self._reported("compact", lambda say: compact_now(
            self.tree, model, settings, archive=self._archive(), on_activity=say, busy=busy))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for this chat's background work (ingest, compaction); False on timeout."""
        return self._lane.wait(timeout)

    def _on_lane(self) -> bool:
        """Whether the caller runs inside this chat's background work."""
        return self._lane.on_own_thread()

    def close(self, timeout: float | None = None) -> bool:
        """Finish the background work and stop the chat's worker thread; the chat takes no more turns."""
        refuse_own_wait(self._on_lane(), "关闭这一局")  # before it is marked closed
        self._closed = True
        self._turn_assembled()
        return self._lane.close(timeout)

    def _turn_assembled(self) -> None:
        if self._first_turn is not None:
            self._first_turn.set()

    def _drain(self) -> bool:
        """Wait for the lane within ``background_wait_s``; True once it has drained. After a
        wait ran out, later calls do not wait behind the stuck work until it is done."""
        stuck = self._stuck
        if stuck is not None:
            if not stuck.done():
                return False
            self._stuck = None
            self._emit(Activity("compact", "卡住的后台任务已经做完，之后照常等它", self.id))
        limit = self._config.background_wait_s
        self._stuck = self._lane.unfinished(limit)
        if self._stuck is None:
            return True
        self._emit(Activity("error", f"后台的压缩或入库 {limit:g} 秒还没做完（旁路模型可能卡住了）："
                                     "这一轮先不等，卡住的那一步做完之前也不再等", self.id))
        return False

    def _land_held(self) -> None:  # under the tree's lock: what was held mid-turn, checked again
        for outcome in self._held.land():
            self._emit(Activity("compact", outcome.message, self.id, outcome))

    def _check_open(self) -> None:
        # Before any write: a closed lane takes no work, so a reply written here would get no memory work.
        if self._closed:
            raise StateError(f"局 {self.id} 已关闭（卡已关闭或这一局已删除）：请用 card.chat() 重新打开")

    def _assemble(self, user: Entry | None, user_text: str, **blocks: Any) -> Turn:
        try:
            return self._assemble_turn(user, user_text, **blocks)
        finally:
            self._turn_assembled()  # the sync started on entering this chat may go on now

    def _assemble_turn(self, user: Entry | None, user_text: str, *, ledger: Ledger | None, roster: str | None,
                       lore_index: str, extra: Sequence[str], appended: bool = False) -> Turn:
        branch = self.tree.branch()
        snapshot = latest_state_entry(branch) if ledger is None else None  # indexed: no walk back to the root
        shown = ledger if snapshot is None else Ledger.from_dict(snapshot.data)
        vector = self.vector if self._config.vector.inject_on_turn else None  # None: no lines, no trace
        recall, trace = recall_with_trace(vector, user_text, branch_ids_of(branch) if vector else None,
                                          timeout=self._config.recall_timeout_s, warn=self._line("vector"))
        held_back = partial(self._resident.held_back, self.id) if has_revisions(self.tree, branch) else None
        resident, held = resident_for_turn(self._resident.read(appended), branch, held_back)  # never edited: no check
        blocks = AppBlocks(format_state(shown), roster if roster is not None else format_roster(shown), lore_index,
                           extra)
        prepared = prepare_turn(branch, "" if user is not None else user_text,
                                self._config.turn_settings(self.user_name, self.char_name), blocks=blocks,
                                resident_summary=resident, recall_lines=recall, lore=self._lore_index(),
                                pins=self._turn_pins())
        if prepared.record.history_cut is not None and not self._said_cut:  # why, once per chat
            self._said_cut = True
            self._emit(Activity("compact", f"{prepared.record.history_cut.reason()}（history_max_chars；"
                                           "会话里的原文都还在）", self.id))
        if prepared.lore is not None:
            for line in prepared.lore.lines():
                self._emit(Activity("lore", line, self.id))
        record = prepared.record.with_recall(trace) if trace else prepared.record
        if held:
            record = resident_withheld(record, self._resident.file)
        if resident and self._resident.file:
            record = record.with_sources("resident", [f"file:{self._resident.file}"])
        if snapshot is not None:  # the ledger shown is the branch's latest snapshot
            record = record.with_sources("state", [f"entry:{snapshot.id}"])
            if roster is None:  # rendered from the same snapshot
                record = record.with_sources("roster", [f"entry:{snapshot.id}"])
        return Turn(prepared.messages, user_text, user, prepared.summary, prepared.resident, tuple(recall),
                    prepared.injection.render(), record, prepared.lore)

    def _lore_index(self) -> LoreIndex | None:
        if self._lore is None:
            return None
        try:
            return self._lore.index()
        except MemoryFileError as exc:  # a bad hand edit or a symlink: say so, and send this turn without lore
            self._emit(Activity("error", f"设定集读不了，这一轮不带设定：{exc}", self.id))
            return None

    def _line(self, kind: Literal["compact", "vector", "discussion"]) -> Callable[[str], None]:
        return lambda text: self._emit(Activity(kind, text, self.id))

    def _reported(self, kind: Literal["compact", "vector", "discussion"],
                  work: Callable[[Callable[[str], None]], _O]) -> _O:
        """Run ``work`` with a line collector; its lines then go out carrying its outcome."""
        lines: list[str] = []
        outcome: _O | None = None
        try:
            outcome = work(lines.append)
            return outcome
        finally:
            for text in lines:
                self._emit(Activity(kind, text, self.id, outcome))

    def _archive(self) -> Callable[[str, str], object] | None:
        # Bounded like the recall: a stuck store never holds the compaction up.
        return bounded_archive(self.vector, warn=self._line("vector")) if self.vector is not None else None

    def _ingest(self, vector: VectorMemory, entry: Entry, branch_ids: Collection[str]) -> None:
        self._reported("vector", lambda say: ingest_for_turn(vector, entry.text, node_id=entry.id,
                                                             branch_ids=branch_ids, warn=say))

    def _rewrite(self) -> None:  # after an edit: compactions back to back while each one lands
        while self._compaction().kind == "compacted" and not self._closed:
            pass

    def _compact(self) -> None:
        self._compaction()

    def _compaction(self) -> CompactionOutcome[CompactionPlan]:
        assert self._model is not None
        model, cfg = self._model, self._config
        return self._reported("compact", lambda say: run_compaction(
            self.tree, model, cfg.compaction(self.user_name, self.char_name), archive=self._archive(),
            on_activity=say, hold=self._held,
            settle=settle_check(self.tree, self._clock, turns=cfg.settle_turns, seconds=cfg.settle_s)))

    def _compact_discussion(self) -> None:
        assert self._model is not None
        model, cfg = self._model, self._config
        self._reported("discussion", lambda say: run_discussion_compaction(
            self.tree, model, context_window=cfg.discussion_window, reserve=cfg.discussion_reserve,
            keep_recent=cfg.discussion_keep, on_activity=say, max_input_chars=cfg.side_input_max_chars))
