"""Chat folders replaced by symlinks to outside the card (issue 26, item 1).

Before: the symlink guard covered 记忆/ only. With 对话/ a symlink, chat_ids() listed the
outside folders, delete_chat("photos") removed outside/photos recursively, and chat() /
import_chat() wrote session files there; a symlinked chat folder, 会话/ folder or session
file was read and written the same way. Every reply here is a hand-written stand-in.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from liyuan import Card
from liyuan.card.housekeeping import remove_inside
from liyuan.card.layout import CardLayout
from liyuan.errors import UnsafePathError
from liyuan.model import FunctionModel, ModelRequest

from .test_fixtures import RECAP_A, memory, merge_for, user_text, write_chat

SECRET = "卡片外面的私人文件"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _outside(root: Path) -> Path:
    outside = root / "outside"
    (outside / "photos").mkdir(parents=True)
    (outside / "photos" / "a.jpg").write_text(SECRET, encoding="utf-8")
    (outside / "会话").mkdir()
    (outside / "会话" / "s1.jsonl").write_text(
        '{"type":"session","version":1,"id":"s"}\n'
        '{"id":"x1","parentId":null,"type":"message","role":"user","text":"' + SECRET + '"}\n', encoding="utf-8")
    return outside


def _card(root: Path, which: str) -> tuple[Path, Path]:
    """A card with chat jA, and ``which`` (a path under 对话/) replaced by a symlink to outside."""
    card, outside = root / "card", _outside(root)
    write_chat(card, "jA", [("user", "我进城了。"), ("assistant", "小满抬头。")])
    chats = card / "对话"
    if which == "对话":
        os.rename(chats, outside / "moved")
        os.symlink(outside, chats)
    elif which == "photos":
        os.symlink(outside / "photos", chats / "photos")
    elif which == "jA":
        os.rename(chats / "jA", outside / "jA")
        os.symlink(outside / "jA", chats / "jA")
    elif which == "会话":
        os.rename(chats / "jA" / "会话", outside / "jA-sessions")
        os.symlink(outside / "会话", chats / "jA" / "会话")
    elif which == "s1.jsonl":
        (chats / "jA" / "会话" / "s1.jsonl").unlink()
        os.symlink(outside / "会话" / "s1.jsonl", chats / "jA" / "会话" / "s1.jsonl")
    elif which == "meta.json":
        (outside / "meta.json").write_text('{"name": "' + SECRET + '"}', encoding="utf-8")
        os.symlink(outside / "meta.json", chats / "jA" / "meta.json")
    return card, outside


def _model(sent: list[str]) -> FunctionModel:
    def fn(request: ModelRequest) -> str:
        sent.append(user_text(request))
        return RECAP_A if request.purpose == "recap" else merge_for("jA")
    return FunctionModel(fn)


WHICH = ["对话", "photos", "jA", "会话", "s1.jsonl", "meta.json"]


@pytest.mark.parametrize("which", WHICH)
def test_nothing_outside_is_listed_read_written_or_deleted(tmp_path: Path, which: str) -> None:
    card_dir, outside = _card(tmp_path, which)
    before = _snapshot(outside)
    sent: list[str] = []
    source = tmp_path / "import.txt"
    source.write_text("小满：你好。\n阿明：我来了。\n", encoding="utf-8")
    with Card.open(card_dir, side_model=_model(sent), background=False) as card:
        with contextlib.suppress(UnsafePathError):
            assert "photos" not in card.chat_ids()
        for call in (lambda: card.delete_chat("photos"), lambda: card.delete_chat("jA"),
                     lambda: card.chat("jA", title="新名字").prepare("又来了。"),
                     lambda: card.chat("jB").prepare("好。"), lambda: card.import_chat(source, "jC"),
                     card.sync, lambda: memory(card_dir, _model(sent)).sync()):
            with contextlib.suppress(UnsafePathError):  # refused, or work that stays inside
                call()
    assert _snapshot(outside) == before  # nothing outside written or deleted
    assert (outside / "photos" / "a.jpg").is_file()
    assert not any(SECRET in text for text in sent)  # nothing outside sent to the model


def test_a_symlinked_chats_folder_is_refused_loudly(tmp_path: Path) -> None:
    card_dir, outside = _card(tmp_path, "对话")
    sent: list[str] = []
    with Card.open(card_dir, side_model=_model(sent), background=False) as card:
        with pytest.raises(UnsafePathError, match="符号链接"):
            card.chat_ids()
        with pytest.raises(UnsafePathError, match="符号链接"):
            card.delete_chat("photos")
        with pytest.raises(UnsafePathError, match="符号链接"):
            card.chat("jA")
    notes: list[str] = []
    with pytest.raises(UnsafePathError):
        memory(card_dir, _model(sent), on_activity=notes.append).sync()
    assert sent == [] and any("符号链接" in n for n in notes)
    assert (outside / "photos" / "a.jpg").is_file()


def test_a_symlinked_chat_folder_is_not_a_chat_and_is_never_deleted(tmp_path: Path) -> None:
    card_dir, outside = _card(tmp_path, "photos")
    with Card.open(card_dir, background=False) as card:
        assert card.chat_ids() == ["jA"]
        with pytest.raises(UnsafePathError, match="符号链接"):
            card.delete_chat("photos")
    assert (outside / "photos" / "a.jpg").is_file()


def test_the_removal_itself_never_follows_a_link_swapped_in_after_the_check(tmp_path: Path) -> None:
    # The path check runs first; remove_inside opens every folder on the way relative to
    # its parent without following links, so a swap after the check still removes nothing.
    card_dir, outside = _card(tmp_path, "对话")
    with pytest.raises(UnsafePathError):
        remove_inside(card_dir, ("对话", "photos"))
    card_dir2, outside2 = _card(tmp_path / "two", "photos")
    with pytest.raises(UnsafePathError):
        remove_inside(card_dir2, ("对话", "photos"))
    assert (outside / "photos" / "a.jpg").is_file() and (outside2 / "photos" / "a.jpg").is_file()
    write_chat(card_dir2, "jB", [("user", "好。")])
    assert remove_inside(card_dir2, ("对话", "jB")) is True
    assert remove_inside(card_dir2, ("对话", "jB")) is False
    assert not (card_dir2 / "对话" / "jB").exists()


@pytest.mark.parametrize("name", ["向量记忆.sqlite", "向量记忆.sqlite-wal", "meta.json"])
def test_a_symlinked_file_of_a_chat_is_refused(tmp_path: Path, name: str) -> None:
    card_dir, outside = _card(tmp_path, "")
    os.symlink(outside / "photos" / "a.jpg", card_dir / "对话" / "jA" / name)
    with pytest.raises(UnsafePathError):
        CardLayout(card_dir).chat_file("jA", name)
