"""A card's vector memory on either backend: the same turns send the same messages (issue 22).

The card is played through ``Card``/``Chat`` as an app would, once with each chat's chunks
in its SQLite file and once with the whole card in PostgreSQL (``storage=CardStorage.postgres(...)``);
ranking is the library's, so every assembled turn must be identical, recall included.
Deleting the chat drops its rows from the database.
"""

from __future__ import annotations

from pathlib import Path

from liyuan import Card, CardStorage, MemoryConfig, VectorConfig
from liyuan.clock import counter_ids, fixed_clock
from liyuan.model import ChatMessage

PLACES = ["东门的茶摊", "北礁的灯塔", "码头的石阶", "老梨树下", "城西的当铺", "渡口的白帆",
          "灯室的铜铃", "雪夜的客栈", "南街的书坊", "河边的磨坊", "钟楼的顶层", "集市的尽头"]


def play(card_dir: Path, storage: CardStorage | None) -> list[list[ChatMessage]]:
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash"))
    sent: list[list[ChatMessage]] = []
    with Card.open(card_dir, config=config, user_name="阿简", char_name="林溯", background=False,
                   clock=fixed_clock(), ids=counter_ids("e"), auto_sync=False, storage=storage) as card:
        chat = card.chat("jA", greeting="雾很大。")
        for i, place in enumerate(PLACES):
            sent.append(chat.prepare(f"第{i}天，我们去{place}看看。").messages)
            chat.record(f"（第{i}天）林溯带你到了{place}，" + "那里的风很冷，她讲了一段旧事。" * 4)
        sent.append(chat.prepare("还记得北礁的灯塔吗？").messages)
    return sent


def test_both_backends_send_identical_turns_and_a_deleted_chat_leaves_no_rows(
        tmp_path: Path, postgres_dsn: str) -> None:
    import psycopg

    on_files = play(tmp_path / "files" / "雾港", None)
    stores = CardStorage.postgres(postgres_dsn, scope="雾港")
    try:
        on_postgres = play(tmp_path / "pg" / "雾港", stores)
        assert on_postgres == on_files
        assert any("【剧情记忆】" in m.content and "北礁的灯塔" in m.content for m in on_files[-1])  # recall ran
        assert not (tmp_path / "pg" / "雾港" / "对话" / "jA" / "向量记忆.sqlite").exists()
        with psycopg.connect(postgres_dsn) as db:
            count = "SELECT count(*) FROM liyuan_chunks WHERE scope = '雾港' AND chat = 'jA'"
            assert db.execute(count).fetchone()[0] > 0  # type: ignore[index]
            with Card.open(tmp_path / "pg" / "雾港", auto_sync=False, storage=stores) as card:
                assert card.delete_chat("jA")
            assert db.execute(count).fetchone()[0] == 0  # type: ignore[index]
    finally:
        stores.close()
