"""Vector memory on: trimmed text is archived, finished turns ingested, each turn recalls.

Run it: ``python examples/with_vector.py`` (needs the ``vector`` extra: numpy, jieba).

The ``hash`` embedder needs no model files; with it, recall is the lexical half of the
hybrid (BM25 over Chinese bigrams) plus a hashing vector. ``semantic`` (bundled
Universal Sentence Encoder) or ``openai`` (an embeddings endpoint) add real semantics.
Role-play and side-model replies are stand-ins, labelled, not model output.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from liyuan import Card, MemoryConfig, VectorConfig
from liyuan.testing import placeholder_side_model

DETAILS = ["林溯把工具间的铜钥匙搁在你碗边。", "七号浮标去年秋天就熄了。", "补给船海鹞号后天上午到。",
           "灯油只剩两桶。", "电台坏了一个礼拜。", "北礁的雾里亮起一点绿光，闪了三下。"]


def main(root: Path) -> list[str]:
    """Play 40 turns, then ask about an early detail; returns the recalled lines."""
    # --8<-- [start:vector]
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash"))
    with Card.open(root / "cards" / "雾港", side_model=placeholder_side_model(), config=config,
                   user_name="阿简", char_name="林溯") as card:
        chat = card.chat("jA")
        for n in range(40):
            chat.prepare(f"第 {n + 1} 轮，我接着往下问。")
            chat.record(f"（脚本回复，不是模型输出）{DETAILS[n % len(DETAILS)]}雾还没散，她没再说话。")
        chat.flush()                                    # ingest and compaction are done
        turn = chat.prepare("那把铜钥匙后来放哪了？")
        for line in turn.recall:                        # the 【剧情记忆】 lines of this turn
            print(line.splitlines()[0][:60])
    # --8<-- [end:vector]
    assert chat.summary is not None
    assert any("铜钥匙" in line for line in turn.recall), turn.recall
    assert any(m.content.count("【剧情记忆】") == 1 for m in turn.messages)
    return list(turn.recall)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder))
