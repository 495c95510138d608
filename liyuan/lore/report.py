"""What the lore layer did in one turn: the activated entries and why, what fit, what was cut
or dropped (:class:`LoreReport`, kept on the turn), and the two blocks' text (:class:`LoreBlocks`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["LoreBlocks", "LoreCut", "LoreHit", "LoreReport"]


@dataclass(frozen=True)
class LoreHit:
    """One activated entry and why."""

    title: str
    why: str
    """Chinese: ``常驻``, ``关键词「雾港」（新消息）``, ``递归第 1 步：……``."""
    step: int = 0
    """0: activated by the chat text; n: by content, recursion step n."""


@dataclass(frozen=True)
class LoreCut:
    """An activated entry whose full text did not fit this turn."""

    title: str
    chars: int
    """Its block's length (UTF-16 units)."""
    left: int
    """What was left of the share when it came up."""


@dataclass(frozen=True)
class LoreReport:
    """What the lore layer did this turn (kept on the turn's record)."""

    activated: tuple[LoreHit, ...]
    included: tuple[str, ...]
    """Titles whose full text is in 【相关设定】, in order."""
    cut: tuple[LoreCut, ...]
    share_chars: int
    text_chars: int
    index_chars: int
    index_titles: int
    """Titles listed in 【设定集索引】."""
    index_left_out: int
    """Enabled entries neither in full nor in the index (the index ran out of room)."""
    entries: int
    """Entries in the book."""
    regex_timeouts: tuple[str, ...] = ()
    regex_skipped: int = 0
    dropped: tuple[tuple[str, str], ...] = ()
    """Entries that matched but did not come in, with why (probability, inclusion group)."""

    def lines(self) -> list[str]:
        """The activity lines (Chinese) for this turn: one summary, one per cut entry."""
        if not self.activated and not self.index_titles and not self.dropped:
            return []
        constant = sum(1 for hit in self.activated if hit.why == "常驻")
        lines = [f"设定集：激活 {len(self.activated)} 条（常驻 {constant} 条），【相关设定】放进 "
                 f"{len(self.included)} 条 {self.text_chars} 字，【设定集索引】列 {self.index_titles} 条标题 "
                 f"{self.index_chars} 字（份额 {self.share_chars} 字）"]
        lines += [f"设定集：「{cut.title}」已激活但放不下（{cut.chars} 字，份额只剩 {cut.left} 字），"
                  "本轮只在索引里列标题" for cut in self.cut]
        if self.regex_timeouts:
            lines.append(f"设定集：{len(self.regex_timeouts)} 个正则关键词超时，按没匹配算："
                         + "、".join(self.regex_timeouts[:5]))
        if self.regex_skipped:
            lines.append(f"设定集：本轮正则时限用完，{self.regex_skipped} 个正则关键词没有检查")
        lines += [f"设定集：「{title}」匹配了但没放进来：{why}" for title, why in self.dropped]
        return lines

    def to_dict(self) -> dict[str, object]:
        """JSON-able (for the harness's turn record); ``dropped`` only when an entry was."""
        data = asdict(self)
        if not self.dropped:
            del data["dropped"]
        return data


@dataclass(frozen=True)
class LoreBlocks:
    """The two blocks' bodies (labels not included) and the report."""

    text: str
    """【相关设定】: the included entries, each ``「标题」`` then its content."""
    index: str
    """【设定集索引】: ``- 标题`` lines."""
    report: LoreReport
