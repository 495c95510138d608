"""A sync with nothing to do reads the manifest a fixed number of times, however many chats (issue 24).

The replies are hand-written stand-ins (FunctionModel), not model output.
"""

from __future__ import annotations

from pathlib import Path

from liyuan.card.files import MemoryFiles, sha1_text
from liyuan.card.inputs import SyncSettings
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import Manifest, save_manifest
from liyuan.card.sessions import source_mark_of
from liyuan.card.sync import CardMemory
from liyuan.model import FunctionModel

from .test_fixtures import write_chat


class CountingFiles(MemoryFiles):
    """Counts reads of the manifest."""

    manifest_reads = 0

    def read_bytes(self, path: Path) -> bytes | None:
        if path == self.layout.manifest:
            self.manifest_reads += 1
        return super().read_bytes(path)


def _settled_card(card: Path, chats: int) -> None:
    """Every chat recapped and merged, as a finished sync leaves them."""
    layout = CardLayout(card)
    layout.recaps_dir.mkdir(parents=True)
    manifest = Manifest()
    for index in range(chats):
        chat_id = f"c{index:03d}"
        write_chat(card, chat_id, [("user", f"第{index}局的开场"), ("assistant", f"第{index}局的回复")])
        text = f"# 第{index}局\n\n- 手写复盘 {index}\n"
        layout.recap_path(chat_id).write_text(text, encoding="utf-8")
        record = manifest.record(chat_id)
        record.source_mark = source_mark_of(layout.sessions_dir(chat_id))
        record.recap_at = "2026-01-01T00:00:00+00:00"
        record.merged_hash = sha1_text(text)
    layout.handbook.write_text("# 记忆\n", encoding="utf-8")
    layout.resident.write_text("常驻\n", encoding="utf-8")
    save_manifest(MemoryFiles(layout), manifest)


def test_no_change_sync_reads_the_manifest_a_fixed_number_of_times(tmp_path: Path) -> None:
    counts = {}
    for chats in (3, 30):
        card = tmp_path / f"card{chats}"
        _settled_card(card, chats)
        files = CountingFiles(CardLayout(card))
        model = FunctionModel(lambda request: "不该被调用")
        outcome = CardMemory(card, model, SyncSettings(user_name="你", char_name="他"), files=files).sync()
        assert (outcome.recapped, outcome.failed, outcome.merged) == ([], [], "no-change")
        assert model.calls == []
        counts[chats] = files.manifest_reads
    assert counts[30] == counts[3] <= 5
