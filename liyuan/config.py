"""Every setting of the memory in one typed object, with the seed's defaults.

:class:`MemoryConfig` is what an app hands to :meth:`liyuan.Card.open`. It is frozen and
validated on construction: a bad value raises :class:`~liyuan.errors.ConfigError` with a
Chinese message naming the field, before any file is touched. :meth:`MemoryConfig.from_dict`
reads the same fields from a JSON-like mapping (say, an app's settings file) and refuses
unknown keys, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from liyuan.bounds import SIDE_INPUT_MAX_CHARS
from liyuan.card.inputs import RECAP_INPUT_MAX_CHARS, SyncSettings
from liyuan.context.budget import RESIDENT_ENVELOPE_CHARS
from liyuan.context.inputs import TurnSettings
from liyuan.context.pins import DEFAULT_PIN_SHARE
from liyuan.context.window import HISTORY_MAX_CHARS
from liyuan.discussion.messages import KEEP_RECENT_TOKENS, RESERVE_TOKENS
from liyuan.errors import ConfigError
from liyuan.fields import check_int
from liyuan.lore.activate import DEFAULT_LORE_SHARE
from liyuan.story.compact import DEFAULT_EVERY_N_TURNS, KEEP_RECENT_TURNS, MIN_COMPACT_CHARS, CompactionSettings
from liyuan.story.settle import SETTLE_TURNS
from liyuan.vector.config import VectorConfig
from liyuan.vector.config_file import config_from_dict
from liyuan.vector.recall import RECALL_TIMEOUT_S

__all__ = ["Durability", "MemoryConfig"]

Durability = Literal["entry", "turn"]
"""When a session file is fsynced: after every append, or once per recorded turn."""


def _seconds_field(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} 应为正数（秒），实际是 {value!r}")


BACKGROUND_WAIT_S = 900.0
"""Default bound on a turn's wait for the chat's background work (see ``background_wait_s``)."""


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The memory's settings. Every default is the seed's (``梨园`` as shipped).

    Raises:
        ConfigError: On construction, when a field has the wrong type or range.
    """

    keep: int = KEEP_RECENT_TURNS
    """Turns kept verbatim after a compaction (最近 6 轮逐字保留)."""
    every_n_turns: int = DEFAULT_EVERY_N_TURNS
    """The period: compact once ``keep + every_n_turns`` turns are uncovered; 0 turns
    automatic compaction off (a manual ``compact_now`` still works)."""
    min_chars: int = MIN_COMPACT_CHARS
    """Floor on the text a compaction covers (UTF-16 units of the serialized turns)."""
    language: str = "中文"
    """The language the side model writes summaries, recaps and the handbook in."""
    budget_chars: int = RESIDENT_ENVELOPE_CHARS
    """The envelope the resident summary shares with the relay summary, the ledger and
    the roster each turn; only the resident summary yields (cut at a paragraph, or dropped)."""
    history_max_chars: int = HISTORY_MAX_CHARS
    """Bound of the verbatim history each turn sends (characters of the kept turns, the
    user's new words included): beyond it the oldest whole turns are left out and the
    turn's record says how many (``history_cut``). Compaction keeps a chat far below it;
    without a side model, this bound is what keeps a long chat's context from growing."""
    lore_share: float = DEFAULT_LORE_SHARE
    """The share of ``budget_chars`` the lore blocks (【相关设定】 and 【设定集索引】) may take
    each turn (0.4: 1720 of 4300 characters); entries that do not fit are cut whole and reported."""
    pin_share: float = DEFAULT_PIN_SHARE
    """The share of ``budget_chars`` every pin a chat's turns carry may take together (the
    card's pins and the chat's own; 0.1: 430 of 4300 characters), taken out of the lore share
    first (never more than it); a pin that would pass it is refused (:mod:`liyuan.app.pins`)."""
    settle_turns: int = SETTLE_TURNS
    """Swipes settle before memory runs: a compaction waits while a reroll, a forking rewind or
    an edit lies within the last this many turns of the branch (0: not by turns)."""
    settle_s: float = 0.0
    """The same window in seconds by the card's clock (0, the default: not by time); a
    compaction waits while the last swipe or edit is younger than this."""
    vector: VectorConfig = field(default_factory=VectorConfig)
    """Vector memory of the trimmed text (off by default: ``VectorConfig(enabled=True)``
    turns it on; ``embedder`` picks ``e5`` (the default), ``hash``, ``semantic`` or ``openai``)."""
    recall_timeout_s: float = RECALL_TIMEOUT_S
    """How long a turn waits for vector recall before it goes without 【剧情记忆】."""
    background_wait_s: float | None = BACKGROUND_WAIT_S
    """How long an agent-mode ``prepare``, ``compact_now`` and the end of a ``with Card``
    block wait for a chat's background work (the last turn's compaction and ingest; a
    roleplay ``prepare`` does not wait for it)
    before going on without it. Longer than the built-in model's 600 s deadline, so only
    a side model that never returns trips it; ``None`` waits as long as it takes."""
    discussion_window: int = 0
    """Agent-mode discussion compaction: the model's context window in tokens; 0 is off."""
    discussion_reserve: int = RESERVE_TOKENS
    """Discussion compaction fires when the context exceeds ``window - reserve`` tokens."""
    discussion_keep: int = KEEP_RECENT_TOKENS
    """About this many tokens of the newest discussion stay verbatim."""
    recap_input_max_chars: int = RECAP_INPUT_MAX_CHARS
    """Transcript budget of one recap call (characters); beyond it the earliest part of a
    chat is left out of the recap prompt, which says how much was left out."""
    side_input_max_chars: int = SIDE_INPUT_MAX_CHARS
    """Budget of the covered text one story or discussion compaction sends to the side
    model (characters); beyond it the earliest part is left out, and the prompt and an
    activity line say how much (the vector archive still gets all of it)."""
    merge_recap_max_chars: int | None = None
    """Longest recap sent to a merge (characters); ``None``: the longest a recap reply may
    be. A recap over it is cut, and the merge prompt says how much was left out."""
    durability: Durability = "entry"
    """When a chat's session file is fsynced. ``entry`` (the default): after every
    append, so every entry an append returned survives a power loss. ``turn``: once per
    turn, when :meth:`~liyuan.Chat.record` has written the reply (and the ledger), one
    fsync instead of two or three; a power loss can then lose the user line of a turn
    not yet recorded, never a recorded reply. A killed process loses nothing either
    way: the lines are in the operating system's cache (measured by the SIGKILL tests).
    Either way a crash leaves at most one torn last line, which a reload skips."""

    def __post_init__(self) -> None:
        check_int("keep", self.keep, 1)
        check_int("every_n_turns", self.every_n_turns, 0)
        check_int("min_chars", self.min_chars, 0)
        check_int("budget_chars", self.budget_chars, 0)
        check_int("history_max_chars", self.history_max_chars, 1)
        check_int("discussion_window", self.discussion_window, 0)
        check_int("discussion_reserve", self.discussion_reserve, 0)
        check_int("discussion_keep", self.discussion_keep, 1)
        if isinstance(self.lore_share, bool) or not isinstance(self.lore_share, int | float) \
                or not 0 <= self.lore_share <= 1:
            raise ConfigError(f"lore_share 应为 0 到 1 之间的数，实际是 {self.lore_share!r}")
        if isinstance(self.pin_share, bool) or not isinstance(self.pin_share, int | float) \
                or not 0 <= self.pin_share <= 1:
            raise ConfigError(f"pin_share 应为 0 到 1 之间的数，实际是 {self.pin_share!r}")
        check_int("settle_turns", self.settle_turns, 0)
        if isinstance(self.settle_s, bool) or not isinstance(self.settle_s, int | float) \
                or not math.isfinite(self.settle_s) or self.settle_s < 0:
            raise ConfigError(f"settle_s 应为不小于 0 的秒数，实际是 {self.settle_s!r}")
        check_int("recap_input_max_chars", self.recap_input_max_chars, 1)
        check_int("side_input_max_chars", self.side_input_max_chars, 1)
        if self.merge_recap_max_chars is not None:
            check_int("merge_recap_max_chars", self.merge_recap_max_chars, 1)
        if self.durability not in ("entry", "turn"):
            raise ConfigError(f"durability 只能是 entry 或 turn，实际是 {self.durability!r}")
        if not isinstance(self.language, str) or not self.language.strip():
            raise ConfigError(f"language 应为非空文本，实际是 {self.language!r}")
        if not isinstance(self.vector, VectorConfig):
            raise ConfigError(f"vector 应为 VectorConfig，实际是 {type(self.vector).__name__}")
        _seconds_field("recall_timeout_s", self.recall_timeout_s)
        if self.background_wait_s is not None:
            _seconds_field("background_wait_s", self.background_wait_s)
        if self.discussion_window and self.discussion_window <= self.discussion_reserve:
            raise ConfigError(f"discussion_window（{self.discussion_window}）必须大于 discussion_reserve"
                              f"（{self.discussion_reserve}），否则每一轮都会触发讨论压缩")

    def with_changes(self, **changes: Any) -> MemoryConfig:
        """A validated copy with some fields changed."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ConfigError(f"没有这些设置项：{'、'.join(unknown)}")
        return replace(self, **changes)

    def compaction(self, user_name: str, char_name: str) -> CompactionSettings:
        """What a story compaction of a chat between these names reads
        (:func:`liyuan.story.compact.run_compaction`)."""
        return CompactionSettings(user_name, char_name, self.language, self.every_n_turns, self.min_chars,
                                  self.keep, self.side_input_max_chars)

    def turn_settings(self, user_name: str, char_name: str) -> TurnSettings:
        """What a turn's assembly reads (:func:`liyuan.context.assemble.prepare_turn`)."""
        return TurnSettings((user_name, char_name), self.budget_chars, self.lore_share, self.history_max_chars)

    def sync_settings(self, user_name: str, char_name: str) -> SyncSettings:
        """What a card's sync reads (:class:`liyuan.card.sync.CardMemory`)."""
        return SyncSettings(user_name, char_name, self.language, self.recap_input_max_chars,
                            self.merge_recap_max_chars)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryConfig:
        """Read the settings from a mapping; ``vector`` may be a nested mapping.

        Raises:
            ConfigError: Unknown keys, wrong types or ranges.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"记忆设置应为对象，实际是 {type(data).__name__}")
        values = dict(data)
        if isinstance(values.get("vector"), Mapping):
            values["vector"] = config_from_dict(dict(values["vector"]))
        return cls().with_changes(**values)


DESCRIPTIONS_ZH: dict[str, str] = {
    "MemoryConfig.keep": "压缩后逐字保留的最近轮数（一条用户消息算一轮），续演从这些原文接。",
    "MemoryConfig.every_n_turns": "压缩周期：没被摘要覆盖的轮数达到「保留轮数 + 周期」才自动压；填 0 关闭自动压缩，"
                                  "手动的 `compact_now` 照样能用。",
    "MemoryConfig.min_chars": "一次压缩至少要裁掉这么多字（序列化后的 UTF-16 字数），不够就不压。",
    "MemoryConfig.language": "旁路模型写摘要、复盘和手册用的语言。",
    "MemoryConfig.budget_chars": "常驻摘要、本局摘要、账本和登场名录每轮合用的字数上限；超了只截常驻摘要"
                                 "（在段落处截断，剩得太少就整段不送）。",
    "MemoryConfig.history_max_chars": "每轮逐字发送的历史（保留的原文轮次，连同用户这一轮的话）最多这么多字；"
                                      "超了就从最早的整轮开始略去，`turn.record.history_cut` 记下略去了几轮、多少字。"
                                      "有旁路模型时压缩让它远在上限之下；没有旁路模型时，靠它让长局的上下文不再变长。",
    "MemoryConfig.lore_share": "设定集的两块（【相关设定】和【设定集索引】）每轮最多占 `budget_chars` 的几成"
                               "（0.4 即 4300 字里的 1720 字）；放不下的条目整条略去，并报告略去了哪些。",
    "MemoryConfig.recap_input_max_chars": "一次复盘交给旁路模型的原文字数上限；超了这一局最早的部分放不进去，"
                                          "复盘 prompt 会说明省了多少。",
    "MemoryConfig.side_input_max_chars": "一次剧情压缩或讨论压缩交给旁路模型的原文字数上限；超了最早的部分放不进去，"
                                         "prompt 和活动行会说明省了多少（向量记忆的归档仍然收下全部）。",
    "MemoryConfig.merge_recap_max_chars": "合并时每份复盘最多交进去多少字；`None` 表示一份复盘回复允许的最大长度。"
                                          "超了就截断，合并 prompt 会说明省了多少。",
    "MemoryConfig.pin_share": "置顶（`chat.pin`、`card.pin`）每轮合起来最多占 `budget_chars` 的几成"
                              "（0.1 即 4300 字里的 430 字），从设定集的份额里先扣，最多不超过 `lore_share`；"
                              "再置顶一条会超出就整条拒绝（`ConfigError`），从不截断。",
    "MemoryConfig.settle_turns": "重来、回档或改过消息之后，自动压缩等这么多轮再做"
                                 "（最近这几轮里有分叉或改动就先不压）；0 表示不按轮等。手动的 `compact_now` 不等。",
    "MemoryConfig.settle_s": "同样的等待按秒算（用卡的时钟，回放时注入的那个）：最近一次重来、回档或改动"
                             "不到这么多秒就先不压；默认 0，不按时间等。",
    "MemoryConfig.vector": "向量记忆的设置，默认关闭；`VectorConfig(enabled=True)` 打开。",
    "MemoryConfig.recall_timeout_s": "每轮等向量召回的最长秒数；超时这一轮就不出【剧情记忆】。",
    "MemoryConfig.background_wait_s": "agent 模式的 `prepare`、`compact_now` 和 `with Card` 块结束时，最多等这一局的"
                                      "后台活（上一轮的压缩和入库）多少秒；`None` 表示一直等。"
                                      "扮演模式的 `prepare` 不等。",
    "MemoryConfig.discussion_window": "agent 模式讨论压缩用的上下文窗口（token 数）；默认 0，即不做讨论压缩。",
    "MemoryConfig.discussion_reserve": "讨论上下文超过「窗口 − 预留」个 token 才压。",
    "MemoryConfig.discussion_keep": "讨论压缩后逐字保留的最新内容，约这么多 token。",
    "MemoryConfig.durability": "会话文件什么时候落盘（fsync）：`entry`（默认）每追加一条就落盘，"
                               "断电也不丢已写入的任何一条；`turn` 每轮在 `record` 写完回复后落盘一次，"
                               "断电时可能丢掉还没 `record` 的那句用户的话，已记下的回复不丢。进程被杀两种都不丢。",
}
"""The settings page's Chinese description of every field, by ``Class.field``.

The page (docs/hooks/settings_table.py) reads these next to the fields' defaults and English
attribute docstrings, and fails the build when a field has none."""

