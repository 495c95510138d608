"""What a step handler works with: the running scenario, its result type, the registry.

Invariant: step handlers depend on this module and on :mod:`harness.scenario` only,
never on the runner that calls them, so the harness has no import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from liyuan.card.files import CardLayout
from liyuan.clock import counter_ids
from liyuan.session.tree import SessionTree

from .artifacts import ArtifactSet
from .models import ModelSetup
from .placeholder import PLACEHOLDER, PLACEHOLDER_LINE
from .progress import Progress
from .recorder import CallRecord, Recorder
from .scenario import ChatSpec, Scenario, StepSpec
from .story import chat_beats, write_opening

__all__ = [
    "DEFAULT_CLOCK_START",
    "HANDLERS",
    "HAND_WRITTEN_LINE",
    "SCRIPTED_LINE",
    "SESSION_FILE",
    "Handler",
    "RunReport",
    "ScenarioRun",
    "StepResult",
    "handler",
]

DEFAULT_CLOCK_START = "2026-03-01T20:00:00+08:00"
SESSION_FILE = "001.jsonl"

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
    trees: dict[str, SessionTree] = field(default_factory=dict)
    played: dict[str, int] = field(default_factory=dict)
    """Beats of each chat already written into its tree."""
    written: dict[str, list[str]] = field(default_factory=dict)
    """Step id to the txt paths it wrote."""
    activity: list[str] = field(default_factory=list)
    services: dict[str, Any] = field(default_factory=dict)
    """Lazily created helpers shared by steps (card memory, vector memory ...)."""
    current: StepSpec | None = None
    root: Path | None = None
    """The repository root (steps that read a fixture from the repository resolve against it)."""

    @property
    def card_dir(self) -> Path:
        """The card folder in the private work dir."""
        return self.workdir / "cards" / self.scenario.card

    def chat_dir(self, chat_id: str) -> Path:
        """Folder of one chat (局) of the card."""
        return CardLayout(self.card_dir).chat_dir(chat_id)

    def chat(self, chat_id: str) -> ChatSpec:
        """The chat definition."""
        return self.scenario.chats[chat_id]

    def config(self, key: str, default: Any) -> Any:
        """A scenario-level config value."""
        return self.scenario.config.get(key, default)

    def tree(self, chat_id: str) -> SessionTree:
        """The chat's session tree, created (greeting and first ledger) on first use."""
        if chat_id in self.trees:
            return self.trees[chat_id]
        spec = self.chat(chat_id)
        path = CardLayout(self.card_dir).sessions_dir(chat_id) / SESSION_FILE
        tree = SessionTree(path, session_id=f"{chat_id}-session", clock=self.clock,
                           ids=counter_ids(f"{chat_id}-"))
        write_opening(tree, spec)
        self.trees[chat_id] = tree
        self.played[chat_id] = 0
        chat_beats(spec)  # validate a generated chat early
        return tree

    def on_activity(self, line: str) -> None:
        """Collect the memory code's activity lines into the step record."""
        self.activity.append(line)
        self.progress.note(line)

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
