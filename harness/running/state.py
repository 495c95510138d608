"""What a step handler works with: the running scenario, its result type, the registry.

Invariants: step handlers depend on this module and on :mod:`harness.running.scenario` only,
never on the runner that calls them, so the harness has no import circle. A scenario
plays through the app's own objects: one :class:`liyuan.Card` per scenario, opened as
an app opens it (settings from the scenario's ``config`` as a
:class:`~liyuan.config.MemoryConfig`), with the replay's fixed clock and counter ids,
memory work run inline (``background=False``) and card syncs only where a step asks
(``auto_sync=False``); each chat is that card's :class:`liyuan.Chat`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from liyuan.app import Activity, Card, Chat
from liyuan.clock import counter_ids
from liyuan.config import MemoryConfig
from liyuan.storage import CardStorage

from .artifacts import ArtifactSet
from .models import ModelSetup
from .placeholder import PLACEHOLDER, PLACEHOLDER_LINE
from .progress import Progress
from .recorder import CallRecord, Recorder
from .scenario import ChatSpec, Scenario, StepSpec
from .story import chat_turns, write_opening

__all__ = [
    "DEFAULT_CLOCK_START",
    "HANDLERS",
    "HAND_WRITTEN_LINE",
    "SCRIPTED_LINE",
    "Handler",
    "RunReport",
    "ScenarioRun",
    "StepResult",
    "handler",
]

DEFAULT_CLOCK_START = "2026-03-01T20:00:00+08:00"

_T = TypeVar("_T")

SCRIPTED_LINE = "（脚本回复：人工撰写的示范，不是模型输出）"
HAND_WRITTEN_LINE = "（手写复盘：人工撰写，用来演示跨局记忆和遗忘，不是模型输出）"


@dataclass
class StepResult:
    """What a step handler reports."""

    outcome: dict[str, Any]
    """JSON-able outcome, copied into the step record."""
    summary: str
    """One Chinese line for the progress output."""
    failed: bool = False
    """True when the step could not do its job (the run reports it; artifacts are still written)."""


@dataclass
class ScenarioRun:
    """Everything a step handler needs: the scenario, its trees, its files, the model."""

    scenario: Scenario
    recorder: Recorder
    setup: ModelSetup
    workdir: Path
    artifacts: ArtifactSet
    progress: Progress
    clock: Callable[[], str]
    config: MemoryConfig = field(default_factory=MemoryConfig)
    """The scenario's settings, as the card holds them."""
    root: Path | None = None
    """The project root (``sim/imports/`` is read from it)."""
    storage: CardStorage | None = None
    """Where the card keeps its state (:class:`~liyuan.CardStorage`); ``None``: the card folder."""
    opened: dict[str, Chat] = field(default_factory=dict)
    """Chats already opened (their opening written)."""
    played: dict[str, int] = field(default_factory=dict)
    """Turns of each chat already played."""
    written: dict[str, list[str]] = field(default_factory=dict)
    """Step id to the txt paths it wrote."""
    activity: list[str] = field(default_factory=list)
    """The current step's activity lines."""
    events: list[Activity] = field(default_factory=list)
    """The current step's activity events (the lines with their outcome objects)."""
    turns: list[dict[str, Any]] = field(default_factory=list)
    """The record of every assembled turn of the scenario, in order (``sim/turns/``)."""
    chunk_labels: dict[str, str] = field(default_factory=dict)
    """Vector chunk ids (random in every run) to the stable names the artifacts show."""
    current: StepSpec | None = None
    _card: Card | None = None
    _named: bool = False

    def stable_chunks(self, data: Any) -> Any:
        """``data`` (JSON-like) with every ``chunk:<id>`` renamed ``chunk:c1``, ``chunk:c2`` ... in
        the order the scenario's artifacts first name them: a chunk's id is random in every
        run, the artifacts must be byte-stable (the same chunk keeps its name within a run)."""
        if isinstance(data, str):
            if not data.startswith("chunk:"):
                return data
            return self.chunk_labels.setdefault(data, f"chunk:c{len(self.chunk_labels) + 1}")
        if isinstance(data, dict):
            return {key: self.stable_chunks(value) for key, value in data.items()}
        if isinstance(data, list):
            return [self.stable_chunks(value) for value in data]
        return data

    @property
    def card(self) -> Card:
        """The scenario's card, opened on first use in the private work dir."""
        if self._card is None:
            self._card = Card.open(self.workdir / "cards" / self.scenario.card, side_model=self.recorder,
                                   config=self.config, user_name=self.scenario.user, char_name=self.scenario.char,
                                   on_activity=self.on_activity, background=False, clock=self.clock,
                                   ids=counter_ids("e"), auto_sync=False, storage=self.storage)
        return self._card

    def chat_spec(self, chat_id: str) -> ChatSpec:
        """The chat definition."""
        return self.scenario.chats[chat_id]

    def name_chats(self) -> None:
        """Give every chat of the scenario its display name: ``card.chat(id, title=...)``.

        As the app does when the user enters a chat: each gets its folder, ``meta.json``
        and an empty session (no opening is written here: :meth:`chat` does that on first
        use). A chat that exists only as a hand-written recap still has a name in the recap
        and merge prompts. Done once per scenario, at the first memory step (a chat
        deleted later stays deleted).
        """
        if self._named:
            return
        self._named = True
        for chat_id, spec in self.scenario.chats.items():
            self.card.chat(chat_id, title=spec.name)

    def chat(self, chat_id: str) -> Chat:
        """The chat as the app holds it, its opening written on first use.

        The opening (the card's greeting and its alternatives, an import's notes, the
        first world state) is not a turn: it is written onto the new chat's tree the way a
        card's setup or an import writes it (:func:`harness.running.story.write_opening`).
        """
        if chat_id in self.opened:
            return self.opened[chat_id]
        spec = self.chat_spec(chat_id)
        chat = self.card.chat(chat_id, title=spec.name)
        if not chat.tree.branch():
            write_opening(chat.tree, spec)
        self.opened[chat_id] = chat
        self.played[chat_id] = 0
        chat_turns(spec)  # validate a generated chat early
        return chat

    def adopt(self, chat_id: str, chat: Chat) -> None:
        """A chat that came in whole (an import): later steps use it as it is."""
        self.opened[chat_id] = chat
        self.played[chat_id] = len(chat_turns(self.chat_spec(chat_id)))

    def forget_chat(self, chat_id: str) -> None:
        """The chat was deleted: the next use opens it afresh."""
        self.opened.pop(chat_id, None)
        self.played.pop(chat_id, None)

    def on_activity(self, event: Activity) -> None:
        """Collect the card's activity into the step record."""
        self.activity.append(event.text)
        self.events.append(event)
        self.progress.note(event.text)

    def note(self, line: str) -> None:
        """An activity line of a one-layer step (no card event behind it)."""
        self.activity.append(line)
        self.progress.note(line)

    def outcomes(self, kind: type[_T]) -> list[_T]:
        """The current step's outcome objects of one type, in order, each once."""
        found: list[_T] = []
        for event in self.events:
            if isinstance(event.outcome, kind) and not any(event.outcome is seen for seen in found):
                found.append(event.outcome)
        return found

    def header_for(self, records: Sequence[CallRecord]) -> str | None:
        """The provenance line for a txt holding these replies, or ``None``."""
        provenances = {r.provenance for r in records if r.text is not None}
        if not provenances:
            return None
        if provenances == {"scripted"}:
            return SCRIPTED_LINE
        if provenances == {PLACEHOLDER}:
            return PLACEHOLDER_LINE
        models = "、".join(sorted(p.removeprefix("model:") for p in provenances if p.startswith("model:")))
        line = f"（模型输出：{models}，原样记录"
        if self.setup.plumbing:
            line += "；管线演示，不代表摘要质量"
        return line + "）"

    def write_txt(self, key: str, text: str, *, header: str | None = None) -> str | None:
        """Write the step's file for ``key`` (if the scenario names one); returns its path."""
        step = self.current
        assert step is not None
        name = step.files.get(key)
        if name is None:
            return None
        rel = f"txt/{name}"
        body = f"{header}\n\n{text.strip()}" if header else text.strip()
        self.artifacts.add_text(rel, body)
        self.written.setdefault(step.id, []).append(rel)
        return rel


Handler = Callable[[ScenarioRun, StepSpec], StepResult]
HANDLERS: dict[str, Handler] = {}
"""Step kind to handler; filled by :mod:`harness.steps`."""


@dataclass
class RunReport:
    """The result of running some scenarios."""

    artifacts: ArtifactSet
    out_base: Path
    failures: list[str] = field(default_factory=list)
    calls: int = 0
    failed_calls: list[str] = field(default_factory=list)
    """``<scenario> · <call key>: <error>`` for every model call that failed."""
    written: bool = False
    """Whether the files were written (a failed scripted run into ``sim/`` writes nothing)."""
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """``out`` name to its step records (what ``out/<name>.json`` holds under ``steps``)."""


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of one step kind."""

    def register(fn: Handler) -> Handler:
        if kind in HANDLERS and HANDLERS[kind] is not fn:
            raise RuntimeError(f"step kind {kind!r} registered twice")
        HANDLERS[kind] = fn
        return fn

    return register
