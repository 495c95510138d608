"""The settings and the async facade, as the page 「接入你的应用」 shows them (docs/app.md).

Run it: ``python examples/settings_and_async.py`` (default: a temporary folder).

The side model is :func:`liyuan.testing.placeholder_side_model`, the library's test double
(labelled placeholder replies, not model output); a real app passes its own, e.g.
``OpenAIModel(model=...)``. Without a side model a card only assembles context: it never
compacts, recaps or merges. The role-play reply is a scripted line.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from liyuan import Card, ChatMessage, MemoryConfig, Turn, VectorConfig
from liyuan.testing import placeholder_side_model


def open_with_settings(root: Path) -> MemoryConfig:
    """Open a card with its own settings; returns the settings the card holds."""
    # --8<-- [start:settings]
    side = placeholder_side_model()   # 测试替身；应用里换成自己的旁路模型，例如 OpenAIModel(model="…")
    config = MemoryConfig(every_n_turns=20, vector=VectorConfig(enabled=True, embedder="hash"))
    card = Card.open(root / "cards" / "雾港", side_model=side, config=config)
    # --8<-- [end:settings]
    held = card.config
    card.close()
    return held


async def my_model(messages: Sequence[ChatMessage]) -> str:
    """Your role-play model goes here. This stand-in writes a scripted line (not model output)."""
    return f"（脚本回复，不是模型输出）林溯接过伞，没说话。（收到 {len(messages)} 条消息）"


async def play_async(root: Path) -> Turn:
    """One turn through the awaitable facade; returns the turn."""
    # --8<-- [start:async]
    from liyuan import AsyncCard

    side = placeholder_side_model()   # 测试替身；应用里换成自己的旁路模型
    async with await AsyncCard.open(root / "cards" / "雾港", side_model=side) as card:
        chat = await card.chat("jA")
        turn = await chat.prepare("我把伞递给她。")
        await chat.record(await my_model(turn.messages))
    # --8<-- [end:async]
    return turn


def main(root: Path) -> None:
    print(open_with_settings(root / "settings").every_n_turns)
    print(asyncio.run(play_async(root / "async")).messages[-1].content)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder))
