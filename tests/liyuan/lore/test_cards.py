"""Importing cards and lore books: every format, and every malformed case with its error
and nothing written."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path

import pytest

from liyuan import Card
from liyuan.errors import CardImportError, StateError
from liyuan.lore import LORE_FILE, load_book
from liyuan.lore.cards import read_card
from liyuan.lore.containers import MAX_FILE_BYTES
from liyuan.lore.match import LoreIndex

from .cardfiles import b64, charx, png, v2_card, v3_card, world_info, write


def test_v2_json(tmp_path: Path) -> None:
    card = read_card(write(tmp_path, "c.json", v2_card()), user_name="阿简")
    assert card.kind == "chara_card_v2" and card.container == "json" and card.name == "林溯"
    assert card.greetings == ("（林溯提着灯）阿简，你迟到了。", "林溯没回头：进来吧，阿简。")
    assert card.book is not None
    first, second, third = card.book.entries
    # the book keeps the macros as written (export gives them back); a turn reads them replaced
    assert (first.title, first.keys, first.content) == ("雾港", ("雾港",), "雾港终年起雾，{{char}}在这里长大。")
    assert first.secondary_keys == () and first.extra["secondary_keys"] == ["灯塔"]  # selective off: kept, unused
    assert first.extra["extensions"] == {"color": "灰"} and first.extra["position"] == "before_char"
    assert second.secondary_keys == ("雾",) and second.order == 20
    assert third.keys == ("{{user}}",) and third.content == "{{user}}是新来的邮差。"
    named = LoreIndex(card.book, ("阿简", "林溯")).entries
    assert named[0].content == "雾港终年起雾，林溯在这里长大。" and named[2].keys == ("阿简",)
    assert third.scan_turns == 2 and third.secondary_keys == ("信",) and third.logic == "and_any"
    assert third.extra["decorators"] == ["@@scan_depth 4", "@@additional_keys 信"]
    assert card.book.scan_turns == 2 and card.book.recursion_steps == 10


def test_v2_png(tmp_path: Path) -> None:
    card = read_card(write(tmp_path, "c.png", png({"chara": b64(v2_card())})))
    assert card.kind == "chara_card_v2" and card.container == "png"


def test_v3_png_with_both_chunks_prefers_ccv3(tmp_path: Path) -> None:
    card = read_card(write(tmp_path, "c.png", png({"chara": b64(v2_card()), "ccv3": b64(v3_card())})))
    assert card.kind == "chara_card_v3"
    assert card.greetings[0] == "（阿溯提着灯）你，你迟到了。"  # the nickname stands for {{char}}


def test_charx(tmp_path: Path) -> None:
    data = charx(v3_card(), {"assets/icon/images/main.png": png()})
    card = read_card(write(tmp_path, "c.charx", data))
    assert card.container == "charx" and card.kind == "chara_card_v3" and card.book is not None


def test_sillytavern_world_info(tmp_path: Path) -> None:
    card = read_card(write(tmp_path, "w.json", world_info()))
    assert card.kind == "sillytavern_world_info" and not card.is_card and card.book is not None
    ferry, ship, common, stopped = card.book.entries
    assert ferry.logic == "not_any" and ferry.secondary_keys == ("夜",) and ferry.order == 100
    assert ship.keys == (r"/\d+号船/",)
    assert common.constant and not stopped.enabled
    assert ferry.extra["probability"] == 100 and card.book.recursion_steps == 10


def test_lorebook_v3(tmp_path: Path) -> None:
    raw = {"spec": "lorebook_v3", "data": v3_card()["data"]["character_book"]}
    card = read_card(write(tmp_path, "b.json", raw))
    assert card.kind == "lorebook_v3" and card.book is not None and len(card.book.entries) == 3


def test_card_import_writes_card_and_lore_and_greets(tmp_path: Path) -> None:
    folder = tmp_path / "卡"
    with Card.open(folder, background=False, user_name="阿简") as card:
        card.import_card(write(tmp_path, "c.png", png({"ccv3": b64(v3_card())})))
        stored = json.loads((folder / "角色卡.json").read_text(encoding="utf-8"))
        assert stored == v3_card()  # every field kept, unknown ones too
        assert card.lore is not None and card.lore.entries[0].title == "雾港"
        chat = card.chat("jA")
        assert chat.branch()[0].text == "（阿溯提着灯）阿简，你迟到了。"
        turn = chat.prepare("我们回雾港吧")
        assert turn.lore is not None and "雾港" in turn.lore.included
        assert "【相关设定】\n「雾港」\n雾港终年起雾，阿溯在这里长大。" in turn.messages[-1].content
        with pytest.raises(StateError, match="已经有设定集"):
            card.import_card(write(tmp_path, "w.json", world_info()))
        card.import_card(tmp_path / "w.json", replace=True)
        assert card.lore is not None and card.lore.entries[0].title == "渡口"


def test_imported_book_round_trips_through_the_file(tmp_path: Path) -> None:
    with Card.open(tmp_path / "卡", background=False) as card:
        imported = card.import_card(write(tmp_path, "c.json", v2_card()))
        assert load_book(tmp_path / "卡") == imported.book


@pytest.mark.parametrize(("name", "data", "message"), [
    ("plain.png", png(), "没有 ccv3 或 chara"),
    ("b64.png", png({"ccv3": b"@@@not base64@@@"}), "base64"),
    ("json.png", png({"chara": base64.b64encode(b"{not json")}), "JSON"),
    ("cut.png", png({"chara": b64(v2_card())})[:-30], "超出了文件末尾"),
    ("broken.json", b'{"spec": "chara_card_v2", "data": ', "JSON"),
    ("other.json", b'{"spec": "something_else"}', "认不出"),
    ("array.json", b"[1, 2]", "不是 JSON 对象"),
    ("empty.json", b"", "空文件"),
    ("escape.charx", charx(v3_card(), {"../../outside.txt": b"x"}), "越出包外"),
    ("abs.charx", charx(v3_card(), {"/etc/passwd": b"x"}), "越出包外"),
    ("nocard.charx", charx(None, {"readme.txt": b"x"}), "没有 card.json"),
    ("bad.charx", b"PK\x03\x04 this is not a zip", "不是合法的 zip"),
])
def test_malformed_files_are_refused_and_nothing_is_written(tmp_path: Path, name: str, data: bytes,
                                                            message: str) -> None:
    path = write(tmp_path, name, data)
    folder = tmp_path / "卡"
    with Card.open(folder, background=False) as card, pytest.raises(CardImportError, match=message):
        card.import_card(path)
    assert sorted(p.name for p in folder.iterdir()) == []


def assert_refused_and_nothing_written(tmp_path: Path, path: Path, message: str) -> None:
    folder = tmp_path / "卡"
    with Card.open(folder, background=False) as card, pytest.raises(CardImportError, match=message):
        card.import_card(path)
    assert list(folder.iterdir()) == []


def test_fifty_megabyte_image_is_refused_from_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    with open(path, "wb") as handle:
        handle.write(png({"ccv3": b64(v3_card())}))
        handle.truncate(50 * 1024 * 1024)
    assert path.stat().st_size > MAX_FILE_BYTES
    assert_refused_and_nothing_written(tmp_path, path, "太大")


def test_zip_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.charx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(v3_card()))
        archive.writestr("assets/other/other/zeros.bin", b"\0" * (64 * 1024 * 1024))
    assert path.stat().st_size < 1024 * 1024
    assert_refused_and_nothing_written(tmp_path, path, "zip 炸弹")


def test_card_json_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb2.charx"
    padded = json.dumps(v3_card())[:-1] + ', "pad": "' + " " * (40 * 1024 * 1024) + '"}'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", padded)
    assert_refused_and_nothing_written(tmp_path, path, r"zip 炸弹|太大")


def test_slow_regex_key_is_refused_at_import(tmp_path: Path) -> None:
    info = world_info()
    info["entries"]["1"]["key"] = ["/(a|aa)+$/"]
    folder = tmp_path / "卡"
    with Card.open(folder, background=False) as card, pytest.raises(CardImportError, match="超时"):
        card.import_card(write(tmp_path, "w.json", info))
    assert not (folder / LORE_FILE).exists()


def test_invalid_regex_key_is_left_out_and_reported_at_import(tmp_path: Path) -> None:
    card = v3_card()
    card["data"]["character_book"]["entries"][0].update(use_regex=True, keys=["(unclosed", "/(unclosed/"])
    read = read_card(write(tmp_path, "c.json", card))
    assert read.book is not None and read.book.entries[0].keys == ("(unclosed",)  # a bare key is a plain word
    assert read.book.entries[0].extra["unusable_keys"] == ["/(unclosed/"]
    assert [line for line in read.report_lines() if "正则" in line and "/(unclosed/" in line]


@pytest.mark.slow
def test_hundred_thousand_entry_book_imports(tmp_path: Path) -> None:
    entries = [{"keys": [f"地{i}号"], "content": f"第{i}条", "extensions": {}, "enabled": True,
                "insertion_order": i, "use_regex": False} for i in range(100_000)]
    path = write(tmp_path, "big.json", {"spec": "lorebook_v3", "data": {"extensions": {}, "entries": entries}})
    card = read_card(path)
    assert card.book is not None and len(card.book.entries) == 100_000
