"""A card kept in PostgreSQL, as 「接入你的应用」 and 「几台服务器」 show it (docs/app.md, docs/deploy.md).

Run it: ``python examples/postgres_card.py postgresql://…`` (needs the ``postgres`` extra and a
database with the pgvector extension). The tests run it against their own throwaway server.

The side model is :func:`liyuan.testing.placeholder_side_model`, the library's test double
(labelled placeholder replies, not model output); a real app passes its own, e.g.
``OpenAIModel(model=...)``. Without a side model a card only assembles context: it never
compacts, recaps or merges.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from liyuan import MemoryConfig, Turn, VectorConfig
from liyuan.testing import placeholder_side_model


def vectors_in_postgres(root: Path, dsn: str) -> Turn:
    """A card with vector memory on, kept in PostgreSQL; returns the one turn played."""
    side = placeholder_side_model()   # 测试替身；应用里换成自己的旁路模型
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash"))
    # --8<-- [start:vectors]
    from liyuan import Card, CardStorage

    storage = CardStorage.postgres(dsn, scope="雾港-向量")   # dsn 形如 "postgresql://liyuan@db/liyuan"
    with Card.open(root / "cards" / "雾港", side_model=side, config=config, storage=storage) as card:
        chat = card.chat("jA")                                # 卡关上时连接一起关
        turn = chat.prepare("我把伞递给她。")
        chat.record("（脚本回复，不是模型输出）她把伞靠在门边。")
    # --8<-- [end:vectors]
    return turn


def whole_card_in_postgres(root: Path, dsn: str) -> Turn:
    """Sessions, memory documents, locks and vector memory all in PostgreSQL; returns the turn."""
    # --8<-- [start:setup]
    from liyuan import Card, CardStorage

    side = placeholder_side_model()   # 测试替身；应用里换成自己的旁路模型，例如 OpenAIModel(model="…")
    # dsn 是连接串，形如 "postgresql://liyuan@db/liyuan"；scope 是这张卡在数据库里的名字
    storage = CardStorage.postgres(dsn, scope="雾港")
    with Card.open(root / "cards" / "雾港", side_model=side, storage=storage) as card:  # 关卡时连接一起关
        chat = card.chat("night-1")
        turn = chat.prepare("那把青伞是谁留下的？")
        chat.record("（脚本回复，不是模型输出）林溯没抬头：“一个没再回来的人。”")
    # --8<-- [end:setup]
    return turn


def move_card(root: Path, dsn: str) -> Path:
    """A card folder into PostgreSQL and back out into another folder; returns that folder."""
    from liyuan import Card

    with Card.open(root / "cards" / "雾港", side_model=placeholder_side_model()) as card:
        chat = card.chat("jA")
        chat.prepare("我把海图摊在桌上。")
        chat.record("（脚本回复，不是模型输出）她用茶杯压住海图的一角。")
    # --8<-- [start:move]
    from liyuan import CardStorage
    from liyuan.storage import copy_card

    with CardStorage.postgres(dsn, scope="雾港-搬家") as database:
        copy_card(CardStorage.folder(root / "cards" / "雾港"), database)       # 卡目录 → PostgreSQL
        copy_card(database, CardStorage.folder(root / "导出" / "雾港"))        # PostgreSQL → 卡目录
    # --8<-- [end:move]
    return root / "导出" / "雾港"


def main(dsn: str, root: Path) -> None:
    print(vectors_in_postgres(root / "a", dsn).messages[-1].content)
    print(whole_card_in_postgres(root / "b", dsn).messages[-1].content)
    print(move_card(root / "c", dsn))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("用法：python examples/postgres_card.py <PostgreSQL 连接串>")
    with tempfile.TemporaryDirectory() as folder:
        main(sys.argv[1], Path(folder))
