"""The long chats of the long-chat series, written straight to their files (``harness.bench.long``).

A chat is written as the app would have left it: a user line, a reply, a ledger snapshot
when asked, and every 30 turns a scripted relay summary over all but the last 6 (labelled
scripted, never model output), with ids from a seeded source that never repeats one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from liyuan import MemoryConfig
from liyuan.card.layout import CardLayout
from liyuan.clock import IdFactory
from liyuan.session.entries import SESSION_VERSION
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger
from liyuan.vector.config import NARRATIVE, VectorConfig

__all__ = ["CHAR", "KEEP", "LINES", "PLACES", "SUMMARY_EVERY", "USER", "build_chat", "fill_store", "ledger_of",
           "memory_config", "replies_on_branch", "reply", "seeded_ids"]

SUMMARY_EVERY = 30
KEEP = 6
USER, CHAR = "阿简", "林溯"

PLACES = ("雾港码头", "旧城茶馆", "钟楼顶层", "渡口", "书院后院", "灯塔下")
LINES = ("雨还没停，她把伞往你那边偏了偏。", "远处的汽笛声一阵紧过一阵。", "他低头看着那封没有署名的信。",
          "茶已经凉了，可谁也没有起身。", "灯笼在风里晃，影子也跟着晃。", "有人在巷口停下，又很快走开。")


def seeded_ids(seed: int, taken: set[str] | None = None) -> IdFactory:
    """8-hex ids from a seeded source that never hands out one twice (``taken`` is shared)."""
    rng = random.Random(seed)
    seen = taken if taken is not None else set()

    def fresh() -> str:
        while True:
            candidate = f"{rng.getrandbits(32):08x}"
            if candidate not in seen:
                seen.add(candidate)
                return candidate

    return fresh


def ledger_of(turn: int) -> dict[str, Any]:
    return Ledger(time=f"第{turn // 20 + 1}日", location=PLACES[turn % len(PLACES)],
                  items=("青伞", "铜钥匙"), threads=("寻找失踪的船主", f"第{turn // 100}卷的约定")).to_dict()


def reply(turn: int) -> str:
    body = "".join(LINES[(turn + k) % len(LINES)] for k in range(6))
    return f"（第{turn}轮）{body}{CHAR}说：“第{turn}个夜里，我们在{PLACES[turn % len(PLACES)]}见过。”"


def build_chat(card_dir: Path, chat_id: str, turns: int, *, ledger: bool, seed: int = 24) -> tuple[Path, IdFactory]:
    """Write a ``turns``-turn chat as the app would have left it; returns its file and an
    id source that continues the one it was written with."""
    sessions = CardLayout(card_dir).sessions_dir(chat_id)
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / "001.jsonl"
    taken: set[str] = set()
    ids = seeded_ids(seed, taken)
    stamp = "2026-01-01T00:00:00.000+00:00"
    parent: str | None = None
    replies: list[str] = []
    with open(path, "w", encoding="utf-8") as out:

        def write(kind: str, **body: Any) -> str:
            nonlocal parent
            entry_id = ids()
            line = {"id": entry_id, "parentId": parent, "type": kind, "timestamp": stamp, **body}
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            parent = entry_id
            return entry_id

        out.write(json.dumps({"type": "session", "version": SESSION_VERSION, "id": f"{chat_id}-001",
                              "timestamp": stamp}, ensure_ascii=False) + "\n")
        for turn in range(1, turns + 1):
            write("message", role="user", text=f"第{turn}轮：我把伞递给她，问她今晚去不去{PLACES[turn % 6]}。")
            replies.append(write("message", role="assistant", text=reply(turn)))
            if ledger:
                write("custom", customType=STATE_ENTRY_TYPE, data=ledger_of(turn))
            if turn % SUMMARY_EVERY == 0 and turn > KEEP:
                covered = turn - KEEP
                summary = (f"## 前情提要\n- （脚本摘要，非模型输出）覆盖第 1–{covered} 轮。\n"
                           + "".join(f"- 第{t}轮前后：{LINES[t % 6]}\n" for t in range(max(1, covered - 20), covered))
                           + f"\n## 人物\n- {USER}、{CHAR}\n\n## 承诺与伏笔\n- 寻找失踪的船主\n\n"
                           f"## 事实账\n- 青伞、铜钥匙\n\n## 当前场景\n- {PLACES[covered % 6]}")
                write("custom", customType="rp-summary", data={
                    "summary": summary, "coversThroughId": replies[covered - 1], "turns": covered,
                    "chars": covered * 120, "provenance": "scripted"})
    return path, ids


def fill_store(card_dir: Path, chat_id: str, config: VectorConfig, chunks: int, branch: Sequence[str]) -> None:
    """Put ``chunks`` narrative chunks in the chat's store, tagged with replies on its branch."""
    from liyuan.storage.folder import VECTOR_STORE_FILE
    from liyuan.vector.chunkstore import NewChunk
    from liyuan.vector.embed import HashEmbedder
    from liyuan.vector.store import SqliteChunkStore

    store = SqliteChunkStore(CardLayout(card_dir).chat_dir(chat_id) / VECTOR_STORE_FILE)
    embedder = HashEmbedder()
    cap = config.store(NARRATIVE).max_chunks
    tags = list(branch)[-chunks:] if len(branch) >= chunks else [branch[i % len(branch)] for i in range(chunks)]
    for start in range(0, chunks, 1000):
        texts = [f"（第{start + i}段）" + reply(start + i) + reply(start + i + 7)
                 for i in range(min(1000, chunks - start))]
        vectors = embedder.embed(texts)
        store.add([NewChunk(NARRATIVE, text, vectors[i], embedder.label, "narrative", None, tags[start + i])
                   for i, text in enumerate(texts)], max_chunks=cap)


def memory_config(on: bool, cap: int = 5000) -> MemoryConfig:
    vector = VectorConfig(enabled=on, embedder="hash")
    narrative = replace(vector.store(NARRATIVE), max_chunks=cap)
    return MemoryConfig(vector=replace(vector, stores={**vector.stores, NARRATIVE: narrative}))


def replies_on_branch(path: Path) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if '"role":"assistant"' in line:
                out.append(json.loads(line)["id"])
    return out
