"""Four ways to keep a long chat in context, run on the same synthetic chat.

Invariant: the comparison is a pure function of its :class:`Settings`: the chat comes
from :mod:`harness.fixtures.synth`, every summary comes from :func:`scripted_summariser` (a
:class:`~liyuan.model.FunctionModel` that writes a labelled, rule-made summary from the
request text; no model is involved), ids and clock are fixed. Two runs give the same
numbers byte for byte. Context sizes measure what each strategy would send; they say
nothing about how good a summary is: with a scripted summariser no run here can.

Per turn and strategy: the characters and estimated tokens
(:func:`liyuan.tokens.estimate_tokens`) of the context sent to generate that turn's
reply, the side-model calls made after the turn, and every cut: whether the first kept
message is a user message (between turns) or not (inside a turn).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from harness.baselines.agent import run_generic_compaction, visible_entries
from liyuan.app import Activity, Card, Chat
from liyuan.clock import counter_ids, fixed_clock
from liyuan.compaction import CompactionOutcome
from liyuan.context.assemble import SUMMARY_OPENING
from liyuan.model import ChatMessage, FunctionModel
from liyuan.session.entries import Entry
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger, format_roster, format_state, state_from_branch
from liyuan.session.tree import SessionTree
from liyuan.story.compact import CompactionPlan
from liyuan.tokens import chars4, estimate_tokens

from ..fixtures.synth import SynthChat, SynthTurn, generate_chat
from ..running.runfolder import work_base
from .checks import fact_in, fact_in_normalized, normalize
from .memory_checks import check_budget
from .scripted import SCRIPTED_LABEL, scripted_summariser

__all__ = [
    "SCRIPTED_LABEL",
    "Ours",
    "Settings",
    "Strategy",
    "StrategyRun",
    "compare",
    "scripted_summariser",
]

AGENT_SUMMARY_OPENING = "此前的会话已压缩成下面的摘要："
"""How the generic strategy replays its summary (as the coding agent does, a user message)."""


@dataclass(frozen=True)
class Settings:
    """Everything the comparison depends on."""

    turns: int = 600
    seed: int = 7
    reroll_turn: int = 246
    window_tokens: int = 32768
    """The model's context window, for the generic trigger and the over-window count."""
    truncate_turns: int = 20
    """Turns the truncation strategy keeps."""
    agent_reserve_tokens: int = 16384
    """The coding agent's default reserve."""
    agent_keep_recent_tokens: int = 8000
    """Below the agent's default 20000: with a 32k window that default exceeds the trigger
    line (32768 - 16384) and no cut would ever be found."""


@lru_cache(maxsize=65536)
def _tokens(text: str) -> int:
    return estimate_tokens(text)


@lru_cache(maxsize=65536)
def _chars4(text: str) -> int:
    # The agent's own ruler, memoised: the same entries are re-measured every turn.
    return chars4(text)


@dataclass(frozen=True)
class Cut:
    """One cut: at which turn, and whether the first kept message starts a turn."""

    turn: int
    where: str
    """``between`` (the kept part starts with a user message) or ``inside`` (it does not)."""


CLOCK_START = "2026-03-01T08:00:00+08:00"


class Strategy(Protocol):
    """A way to keep a long chat in context: plays each turn and says what it sent."""

    name: str
    label: str

    def turn(self, turn: SynthTurn) -> tuple[list[ChatMessage], list[Cut]]:
        """Play one turn: the messages sent to generate its reply, then the turn written
        (the swiped reply first, at the reroll turn) and maintained; the cuts it made."""
        ...

    def final(self, user_text: str) -> list[ChatMessage]:
        """What would be sent for ``user_text`` after the last turn (nothing written)."""
        ...


def _messages(entries: Sequence[Entry]) -> list[ChatMessage]:
    out = []
    for e in entries:
        if e.type == "message" and e.role in ("user", "assistant") and e.text.strip():
            out.append(ChatMessage("user" if e.role == "user" else "assistant", e.text))
    return out


class _OnTree:
    """The peers' strategies: a bare session tree, a context rule and an end-of-turn rule."""

    def __init__(self, greeting: str) -> None:
        self.tree = SessionTree(None, session_id="synth", clock=fixed_clock(CLOCK_START), ids=counter_ids("s"))
        self.tree.append_message("assistant", greeting, greeting=True)

    def context(self, user_text: str) -> list[ChatMessage]:
        raise NotImplementedError

    def after_turn(self, turn: int) -> list[Cut]:
        return []

    def turn(self, turn: SynthTurn) -> tuple[list[ChatMessage], list[Cut]]:
        messages = self.context(turn.user)
        cuts: list[Cut] = []
        user = self.tree.append_message("user", turn.user)
        if turn.swiped_reply is not None:
            self.tree.append_message("assistant", turn.swiped_reply)
            self.tree.append_custom(STATE_ENTRY_TYPE, dict(turn.ledger))
            cuts += self.after_turn(turn.number)
            self.tree.navigate(user.id)  # the reroll: the next reply forks from the same user message
        self.tree.append_message("assistant", turn.reply)
        self.tree.append_custom(STATE_ENTRY_TYPE, dict(turn.ledger))
        return messages, cuts + self.after_turn(turn.number)

    def final(self, user_text: str) -> list[ChatMessage]:
        return self.context(user_text)


class FullReplay(_OnTree):
    """What a chat web page does: the whole branch, every time."""

    name = "full"
    label = "全量回放"

    def context(self, user_text: str) -> list[ChatMessage]:
        return [*_messages(self.tree.branch()), ChatMessage("user", user_text)]


class Truncation(_OnTree):
    """Keep only the last ``turns`` turns; older ones are dropped unseen."""

    name = "truncate"
    label = "截断"

    def __init__(self, greeting: str, turns: int) -> None:
        super().__init__(greeting)
        self.turns = turns

    def context(self, user_text: str) -> list[ChatMessage]:
        messages = _messages(self.tree.branch())
        starts = [i for i, m in enumerate(messages) if m.role == "user"]
        keep_from = starts[-self.turns] if len(starts) >= self.turns else 0
        return [*messages[keep_from:], ChatMessage("user", user_text)]

    def after_turn(self, turn: int) -> list[Cut]:
        users = sum(1 for e in self.tree.branch() if e.type == "message" and e.role == "user")
        # The window slides every turn once it is full; it always starts at a user message.
        return [Cut(turn, "between")] if users > self.turns else []


class GenericAgent(_OnTree):
    """The coding agent's compaction (:mod:`harness.baselines.agent`): token trigger, cut anywhere."""

    name = "agent"
    label = "通用 agent 压缩"

    def __init__(self, greeting: str, model: FunctionModel, window: int, reserve: int, keep_recent: int) -> None:
        super().__init__(greeting)
        self.model, self.window, self.reserve, self.keep_recent = model, window, reserve, keep_recent

    def context(self, user_text: str) -> list[ChatMessage]:
        summary, entries = visible_entries(self.tree.branch())
        head = [ChatMessage("user", f"{AGENT_SUMMARY_OPENING}\n\n{summary}")] if summary else []
        return [*head, *_messages(entries), ChatMessage("user", user_text)]

    def after_turn(self, turn: int) -> list[Cut]:
        # The library's own trigger: it counts what the agent would send now.
        outcome = run_generic_compaction(self.tree, self.model, context_window=self.window,
                                         reserve_tokens=self.reserve, keep_recent_tokens=self.keep_recent,
                                         estimate=_chars4)
        if outcome.kind != "compacted" or outcome.plan is None:
            return []
        return [Cut(turn, "inside" if outcome.plan.is_split_turn else "between")]


class Ours:
    """Liyuan as an app runs it: a :class:`liyuan.Card` and its :class:`liyuan.Chat`, default settings.

    Each turn is ``chat.prepare`` (what is sent) then ``chat.record`` (the compaction
    check runs inline: six whole turns kept, period 30); the swiped reply is recorded and
    rerolled. The card lives in a private temporary folder, removed by :meth:`close`.
    """

    name = "ours"
    label = "梨园（本项目）"

    def __init__(self, greeting: str, model: FunctionModel, user_name: str, char_name: str) -> None:
        self.model = model
        self.budget_failures = 0
        """Contexts whose shared blocks broke the 4300-character envelope (:func:`check_budget`)."""
        self._folder = Path(tempfile.mkdtemp(prefix="liyuan-eval-", dir=work_base()))
        self._events: list[Activity] = []
        self.card = Card.open(self._folder / "card", side_model=model, user_name=user_name, char_name=char_name,
                              on_activity=self._events.append, background=False, clock=fixed_clock(CLOCK_START),
                              ids=counter_ids("s"), auto_sync=False)
        self.chat: Chat = self.card.chat("synth", greeting=greeting)

    def turn(self, turn: SynthTurn) -> tuple[list[ChatMessage], list[Cut]]:
        ledger = state_from_branch(self.chat.branch())
        state_text, roster = format_state(ledger), format_roster(ledger)
        prepared = self.chat.prepare(turn.user)
        if not check_budget(prepared.summary, state_text, roster, None, None).ok:
            self.budget_failures += 1
        cuts: list[Cut] = []
        if turn.swiped_reply is not None:
            cuts += self._record(turn.swiped_reply, turn)
            self.chat.reroll()
        return prepared.messages, cuts + self._record(turn.reply, turn)

    def _record(self, reply: str, turn: SynthTurn) -> list[Cut]:
        seen = len(self._events)
        self.chat.record(reply, ledger=Ledger.from_dict(turn.ledger))
        cuts: list[Cut] = []
        for event in self._events[seen:]:
            outcome = event.outcome
            if (not isinstance(outcome, CompactionOutcome) or outcome.kind != "compacted"
                    or not isinstance(outcome.plan, CompactionPlan)):
                continue
            if cuts:
                continue  # one compaction, several lines
            branch = self.chat.branch()
            ids = [e.id for e in branch]
            after = branch[ids.index(outcome.plan.covers_through_id) + 1:]
            first = next((e for e in after if e.type == "message"), None)
            cuts.append(Cut(turn.number, "between" if first is not None and first.role == "user" else "inside"))
        return cuts

    def final(self, user_text: str) -> list[ChatMessage]:
        return self.chat.preview(user_text).messages

    def close(self) -> None:
        """Close the card and remove its folder."""
        self.card.close()
        shutil.rmtree(self._folder, ignore_errors=True)


@dataclass
class StrategyRun:
    """One strategy over the whole chat."""

    name: str
    label: str
    chars: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    cuts: list[Cut] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)
    """Fact id -> ``verbatim`` (in the kept turns), ``ledger`` (only in the ledger block),
    ``summarised`` (gone from the context but shown to a summariser), ``lost`` (neither)."""
    swiped_in_context: bool = False
    budget_failures: int = 0

    def to_json(self, window: int) -> dict[str, Any]:
        """Summary numbers plus the per-turn series."""
        fates = list(self.facts.values())
        return {
            "name": self.name, "label": self.label,
            "max_chars": max(self.chars), "max_tokens": max(self.tokens),
            "final_chars": self.chars[-1], "final_tokens": self.tokens[-1],
            "turns_over_window": sum(1 for t in self.tokens if t > window),
            "side_calls": sum(self.calls),
            "compactions": len(self.cuts) if self.name in ("ours", "agent") else 0,
            "cuts_between_turns": sum(1 for c in self.cuts if c.where == "between"),
            "cuts_inside_turn": sum(1 for c in self.cuts if c.where == "inside"),
            "cut_turns": [{"turn": c.turn, "where": c.where} for c in self.cuts if self.name != "truncate"],
            "facts": {k: fates.count(k) for k in ("verbatim", "ledger", "summarised", "lost")},
            "fact_fates": dict(sorted(self.facts.items())),
            "swiped_fact_in_final_context": self.swiped_in_context,
            "budget_failures": self.budget_failures,
            "series": {"chars": self.chars, "tokens": self.tokens, "calls": self.calls},
        }


def _play(chat: SynthChat, strategy: Strategy, model: FunctionModel | None) -> StrategyRun:
    run = StrategyRun(strategy.name, strategy.label)
    for turn in chat.turns:
        before = len(model.calls) if model is not None else 0
        messages, cuts = strategy.turn(turn)
        run.chars.append(sum(len(m.content) for m in messages))
        run.tokens.append(sum(_tokens(m.content) for m in messages))
        run.cuts.extend(cuts)
        run.calls.append((len(model.calls) if model is not None else 0) - before)
    final = strategy.final("（收尾）")
    # The last message is the tail: for ours the ledger block plus the user's words, for
    # the others the user's words alone. Everything before it, minus summaries, is kept text.
    kept = normalize("\n\n".join(m.content for m in final[:-1] if not _is_summary(m)))
    tail = normalize(final[-1].content)
    shown = normalize("\n\n".join(m.content for c in (model.calls if model else []) for m in c.messages
                                    if m.role == "user"))
    for fact in chat.facts:
        run.facts[fact.id] = ("verbatim" if fact_in_normalized(fact, kept)
                              else "ledger" if fact_in_normalized(fact, tail)
                              else "summarised" if fact_in_normalized(fact, shown) else "lost")
    run.swiped_in_context = any(fact_in(chat.swiped, m.content) for m in final)
    return run


def _is_summary(message: ChatMessage) -> bool:
    return message.content.startswith((SUMMARY_OPENING, AGENT_SUMMARY_OPENING))


def compare(settings: Settings = Settings(), *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the four strategies on the synthetic chat and return the report.

    Returns:
        JSON-able: the settings, the chat's shape, and per strategy its summary numbers
        and per-turn series (see :meth:`StrategyRun.to_json`).
    """
    chat = generate_chat(settings.turns, settings.seed, settings.reroll_turn)
    runs = []
    for make in (
        lambda: (FullReplay(chat.greeting), None),
        lambda: (Truncation(chat.greeting, settings.truncate_turns), None),
        lambda: _with_model(chat, lambda m: GenericAgent(chat.greeting, m, settings.window_tokens,
                                                         settings.agent_reserve_tokens,
                                                         settings.agent_keep_recent_tokens)),
        lambda: _with_model(chat, lambda m: Ours(chat.greeting, m, chat.user_name, chat.char_name)),
    ):
        strategy, model = make()
        if progress is not None:
            progress(f"策略：{strategy.label}")
        try:
            run = _play(chat, strategy, model)
        finally:
            if isinstance(strategy, Ours):
                strategy.close()
        if isinstance(strategy, Ours):
            run.budget_failures = strategy.budget_failures
        runs.append(run.to_json(settings.window_tokens))
    return {
        "provenance": "scripted",
        "note": ("所有摘要都来自规则生成的脚本摘要器，不是模型输出；"
                 "这里只比较上下文大小、调用次数和切点，不评价摘要质量。"),
        "settings": {k: getattr(settings, k) for k in settings.__dataclass_fields__},
        "chat": {"turns": len(chat.turns), "chars": sum(len(b.user) + len(b.reply) for b in chat.turns),
                 "facts": len(chat.facts), "scenes": [s.turn for s in chat.scenes], "reroll_turn": chat.reroll_turn},
        "strategies": runs,
    }


def _with_model(chat: SynthChat, build: Callable[[FunctionModel], Strategy]) -> tuple[Strategy, FunctionModel]:
    model = scripted_summariser(chat.user_name, chat.char_name)
    return build(model), model
