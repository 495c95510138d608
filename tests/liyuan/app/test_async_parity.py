"""AsyncCard / AsyncChat are one-to-one with Card / Chat, as the app page says."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from liyuan import AsyncCard, AsyncChat, Card, Chat
from liyuan.testing import placeholder_side_model

PAIRS = [(Card, AsyncCard), (Chat, AsyncChat)]


def _public(cls: type) -> dict[str, Any]:
    """Public methods and properties a class defines (``object``'s own left out)."""
    return {name: inspect.getattr_static(cls, name) for name in dir(cls)
            if not name.startswith("_") and not hasattr(object, name)}


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    signature = inspect.signature(function)
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name not in ("self", "cls")]


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=["Card", "Chat"])
def test_every_public_method_and_property_has_an_awaitable_twin(sync: type, twin: type) -> None:
    twins = _public(twin)
    for name, member in _public(sync).items():
        assert name in twins, f"{twin.__name__} lacks {name}"
        mirrored = twins[name]
        if isinstance(member, property):
            # Reading may touch the disk (the branch, the memory folder): awaited, no arguments.
            assert inspect.iscoroutinefunction(mirrored), f"{twin.__name__}.{name} is not awaitable"
            assert _parameters(mirrored) == [], name
            continue
        function = member.__func__ if isinstance(member, classmethod) else member
        mirror = mirrored.__func__ if isinstance(mirrored, classmethod) else mirrored
        assert inspect.iscoroutinefunction(mirror), f"{twin.__name__}.{name} is not awaitable"
        assert _parameters(mirror) == _parameters(function), f"{twin.__name__}.{name} takes other arguments"


@pytest.mark.parametrize(("sync", "twin"), PAIRS, ids=["Card", "Chat"])
def test_every_public_attribute_is_readable_on_the_twin(tmp_path: Path, sync: type, twin: type) -> None:
    with Card.open(tmp_path / "card") as card:
        chat = card.chat("jA")
        instance, wrapped = (card, AsyncCard(card)) if sync is Card else (chat, AsyncChat(chat))
        for name in (n for n in vars(instance) if not n.startswith("_")):
            assert getattr(wrapped, name) is getattr(instance, name), f"{twin.__name__}.{name}"


def test_the_async_twins_do_what_the_sync_ones_do(tmp_path: Path) -> None:
    history = tmp_path / "old.json"
    history.write_text('[{"role": "user", "content": "我敲门。"}, {"role": "assistant", "content": "门开了。"}]',
                       encoding="utf-8")

    async def scenario() -> None:
        async with await AsyncCard.open(tmp_path / "card", side_model=placeholder_side_model()) as card:
            chat = await card.chat("jA", title="大雾夜")
            await chat.prepare("我把伞递给她。")
            await chat.record_tool("掷骰", {"面": 6}, "4")
            await chat.record("（脚本回复，不是模型输出）她接过伞。")
            assert [e.role for e in await chat.branch() if e.type == "message"][-1] == "assistant"
            assert await chat.summary() is None
            old = await card.import_chat(history, "jOld")
            assert old.id == "jOld" and await card.chat_ids() == ["jA", "jOld"]
            outcome = await card.sync()
            assert outcome is not None and outcome.merged == "ok"
            assert (await card.resident_summary() or "").startswith("# 往局记忆")
            assert any(a.kind == "sync" for a in card.activity)
            assert await chat.close() and await card.close()

    asyncio.run(scenario())
