"""Back-to-back turns with a slow side model (``bench --only long``, issue 36 item 4).

A chat grown turn by turn through :class:`liyuan.Card` / :class:`liyuan.Chat` with the
rule-made scripted summariser (:func:`harness.eval.scripted.scripted_summariser`, labelled
scripted) slowed to ``side_ms`` per call: the time the user waits for a turn is
``prepare()`` + ``record()``; the compactions run on the chat's background lane. The same
turns are then played inline (``background=False``, each compaction inside its turn) to
count the summaries a chat gets when nothing overlaps. ``gap_ms`` is the time between a
turn's ``prepare`` and its ``record`` (the role-play model writing its reply; not timed):
with no gap the side model has less time than the turns take, and its summaries each
cover more turns instead of landing more often.

Only :class:`~liyuan.Card`'s public surface is used, so the same function measures an
older library (the figures before the landing rule changed are in ``docs/eval.md``).
Nothing here asserts a target: it measures and reports.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from liyuan import Card, Completion, FunctionModel, ModelRequest
from liyuan.session.entries import Entry

from ..eval.scripted import scripted_summariser
from .longchat import CHAR, USER, build_chat, memory_config, reply
from .overhead import percentile

__all__ = ["back_to_back"]


def slow_summariser(side_ms: float) -> FunctionModel:
    """The scripted summariser, answering after ``side_ms`` (a side call's wait, no CPU)."""
    inner = scripted_summariser(USER, CHAR)

    def answer(request: ModelRequest) -> Completion:
        time.sleep(side_ms / 1000)
        return inner.complete(request)

    return FunctionModel(answer)


def _play(card_dir: Path, *, turns: int, side_ms: float, gap_ms: float, background: bool) -> dict[str, Any]:
    with Card.open(card_dir, side_model=slow_summariser(side_ms), config=memory_config(False), user_name=USER,
                   char_name=CHAR, background=background) as card:
        chat = card.chat("b2b")
        card.flush()
        before = sum(1 for e in chat.tree if e.custom_type == "rp-summary")
        times: list[float] = []
        for turn in range(turns):
            started = time.perf_counter()
            chat.prepare(f"第{turn}次追问：那把青伞是谁留下的？")
            prepared = time.perf_counter()
            if gap_ms:
                time.sleep(gap_ms / 1000)
            recording = time.perf_counter()
            chat.record(reply(turn))
            times.append((prepared - started + time.perf_counter() - recording) * 1000)
        card.flush()
        landed = sum(1 for e in chat.tree if e.custom_type == "rp-summary") - before
        dropped = sum(1 for a in card.activity if a.kind == "compact" and "丢弃" in a.text)
        covered = _covered_turns(chat.branch())
    return {"p50_ms": statistics.median(times), "p95_ms": percentile(times, 95), "max_ms": max(times),
            "summaries": landed, "dropped": dropped, "covered_turns": covered}


def _covered_turns(branch: Sequence[Entry]) -> int:
    """User turns up to the newest summary's anchor (``coversThroughId``): how far the relay reached."""
    anchor = next((e.data.get("coversThroughId") for e in reversed(branch) if e.custom_type == "rp-summary"), None)
    turns = 0
    for entry in branch:
        if entry.type == "message" and entry.role == "user":
            turns += 1
        if entry.id == anchor:
            return turns
    return 0


def back_to_back(folder: Path, *, turns: int, played: int, side_ms: float = 200.0,
                 gap_ms: float = 0.0) -> dict[str, Any]:
    """Grow a ``turns``-turn chat by ``played`` turns back to back, then the same turns inline."""
    out: dict[str, Any] = {"turns": turns, "played_turns": played, "side_ms": side_ms, "gap_ms": gap_ms}
    for background in (True, False):
        card_dir = folder / f"b2b-{turns}-{int(gap_ms)}-{int(background)}"
        build_chat(card_dir, "b2b", turns, ledger=False)
        out["background" if background else "inline"] = _play(card_dir, turns=played, side_ms=side_ms,
                                                              gap_ms=gap_ms, background=background)
    return out


def print_back_to_back(rows: list[dict[str, Any]]) -> None:
    """One line per run, and the verdict of issue 36: p95 within 2x p50, summaries as inline."""
    print("\n连着走的轮次：旁路模型每次 200 ms（脚本摘要，不是模型输出），用户等的是 prepare + record")
    for row in rows:
        bg, inline = row["background"], row["inline"]
        ratio = bg["p95_ms"] / bg["p50_ms"] if bg["p50_ms"] else float("nan")
        print(f"  {row['turns']} 轮的局再走 {row['played_turns']} 轮，两轮之间 {row['gap_ms']:g} ms："
              f"p50 {bg['p50_ms']:.2f} ms，p95 {bg['p95_ms']:.2f} ms（{ratio:.2f}×），最慢 {bg['max_ms']:.1f} ms；"
              f"落下摘要 {bg['summaries']} 份（丢弃 {bg['dropped']}），一轮一轮等着压的那次 {inline['summaries']} 份"
              f"（那次 p95 {inline['p95_ms']:.1f} ms）")
        print(f"  目标：p95 ≤ 2 × p50 → {'达标' if ratio <= 2 else '未达标'}；摘要份数和不重叠时一样 → "
              f"{'一样' if bg['summaries'] == inline['summaries'] else '不一样'}；摘要覆盖到第 "
              f"{bg['covered_turns']} 轮，不重叠时第 {inline['covered_turns']} 轮")
