"""Export (issue 35 item 7): a card and its lore book go back out as Card V2/V3 JSON or PNG and
as SillyTavern World Info; import → export → import gives an equal book, also after a hand
edit of 设定集.yaml and after adopt_lore; macros come back as macros."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from liyuan import Card
from liyuan.lore import LORE_FILE, LoreBook, LoreEntry, parse_book
from liyuan.lore.cards import read_card
from liyuan.lore.store import dump_book

from .cardfiles import st_card, st_entry, v2_card, v3_card, world_info, write
from .test_st_rules import sent


def st_book_card() -> dict[str, Any]:
    """A card as SillyTavern exports it, with what its books hold: regex keys with flags, a key
    that does not compile, a secondary logic, a scan depth, probability, a group, macros."""
    return st_card([
        st_entry(0, ["/drag(on|ons)/i", "wyrm"], "{{char}} fears dragons.", comment="dragons", order=300),
        st_entry(1, ["harbor"], "{{user}} knows the harbor.", secondary=["night"], selectiveLogic=2, order=10,
                 scan_depth=3, probability=40, group="weather", group_weight=30),
        st_entry(2, ["/bad(/", "elf"], "Elves.", comment="elves", exclude_recursion=True, match_whole_words=False),
        {**st_entry(3, ["rule"], "@@activate\nAlways.", comment="rule"), "constant": True},
    ])


def imported(tmp_path: Path, name: str, source: Path) -> Card:
    card = Card.open(tmp_path / name, background=False, user_name="Ann")
    card.import_card(source)
    return card


@pytest.mark.parametrize(("name", "raw", "out"), [
    ("v2", v2_card(), "back.json"), ("v3", v3_card(), "back.png"), ("st", st_book_card(), "back.json"),
    ("st-png", st_book_card(), "back.png"),
])
def test_card_import_export_import_is_identical(tmp_path: Path, name: str, raw: dict[str, Any], out: str) -> None:
    spec = raw["spec"]
    with imported(tmp_path, "a", write(tmp_path, "in.json", raw)) as first:
        path = first.export_card(tmp_path / out, spec=spec)
        book = first.lore
    again = read_card(path, user_name="Ann")
    assert again.kind == spec and again.container == out.split(".")[1]
    assert again.book == book and book is not None
    with imported(tmp_path, "b", path) as second:
        assert second.lore == book


def test_world_info_import_export_import_is_identical(tmp_path: Path) -> None:
    with imported(tmp_path, "a", write(tmp_path, "w.json", world_info())) as first:
        path = first.export_lore(tmp_path / "back.json")
        book = first.lore
    assert read_card(path).kind == "sillytavern_world_info" and read_card(path).book == book


def test_macros_regex_keys_and_order_come_back_as_sillytavern_reads_them(tmp_path: Path) -> None:
    with imported(tmp_path, "a", write(tmp_path, "in.json", st_book_card())) as card:
        card_out = json.loads(card.export_card(tmp_path / "c.json").read_text(encoding="utf-8"))
        world = json.loads(card.export_lore(tmp_path / "w.json").read_text(encoding="utf-8"))
    entries = card_out["data"]["character_book"]["entries"]
    assert entries[0]["content"] == "{{char}} fears dragons." and entries[1]["content"] == "{{user}} knows the harbor."
    assert entries[0]["keys"] == ["/drag(on|ons)/i", "wyrm"] and entries[2]["keys"] == ["elf", "/bad(/"]
    assert [e["insertion_order"] for e in entries] == [300, 10, 100, 100]
    assert entries[1]["extensions"]["scan_depth"] == 4 and entries[1]["extensions"]["selectiveLogic"] == 2
    assert entries[1]["extensions"]["probability"] == 40 and entries[1]["extensions"]["group"] == "weather"
    assert entries[3]["content"] == "@@activate\nAlways."
    assert card_out["data"]["character_book"]["recursive_scanning"] is True
    wi = world["entries"]
    assert wi["1"]["key"] == ["harbor"] and wi["1"]["order"] == 10 and wi["1"]["selectiveLogic"] == 2
    assert wi["1"]["probability"] == 40 and wi["1"]["group"] == "weather" and wi["1"]["groupWeight"] == 30
    assert wi["2"]["excludeRecursion"] is True and wi["2"]["matchWholeWords"] is False
    assert wi["0"]["content"] == "{{char}} fears dragons."


def test_round_trip_after_a_hand_edit_and_after_adopt_lore(tmp_path: Path) -> None:
    with imported(tmp_path, "a", write(tmp_path, "in.json", st_book_card())) as card:
        text = (tmp_path / "a" / LORE_FILE).read_text(encoding="utf-8")
        edited = parse_book(text)
        first, *others = edited.entries
        changed = LoreEntry(**{**first.__dict__, "title": "巨龙", "content": "改过的正文，{{char}}。",
                               "keys": ("巨龙", "/Drake/"), "order": 7, "secondary_keys": ("山",),
                               "logic": "and_all", "enabled": False})
        edited = LoreBook((changed, *others), edited.name, edited.description, edited.scan_turns,
                          edited.recursion_steps, edited.extra)
        (tmp_path / "a" / LORE_FILE).write_text(dump_book(edited), encoding="utf-8")
        assert card.lore == edited
        for out in ("hand.json", "hand.png"):
            assert read_card(card.export_card(tmp_path / out)).book == edited
        assert read_card(card.export_lore(tmp_path / "hand-wi.json")).book is not None
        card.adopt_lore([LoreEntry("学来的", content="从两局里学到的。", keys=("学",), sources=("jA", "jB"))])
        adopted = card.lore
        assert adopted is not None and adopted.entries[-1].sources == ("jA", "jB")
        assert read_card(card.export_card(tmp_path / "adopted.json")).book == adopted
        wi_book = read_card(card.export_lore(tmp_path / "adopted-wi.json")).book
        assert wi_book is not None and wi_book.entries[-1].sources == ("jA", "jB")


def test_the_exported_world_info_activates_the_same_entries(tmp_path: Path) -> None:
    """Read back under SillyTavern's rules, the exported book calls up what the card's book did
    (the probability set to 100: two chats roll differently, by design)."""
    book_card = st_book_card()
    book_card["data"]["character_book"]["entries"][1]["extensions"]["probability"] = 100
    with imported(tmp_path, "a", write(tmp_path, "in.json", book_card)) as card:
        world = json.loads(card.export_lore(tmp_path / "w.json").read_text(encoding="utf-8"))
    chats = {"a Dragon in the harbor": ["rule", "dragons", "harbor"], "the harbor at night": ["rule"],
             "an elfin wyrm": ["rule", "dragons", "elves"], "elfish rule": ["rule", "elves"]}
    wrapped = st_card([])
    for said, expected in chats.items():
        from_card = sent(tmp_path, book_card, [], said)
        assert from_card == expected, said
        wrapped_book = {**wrapped, "data": {**wrapped["data"], "character_book": None}}
        folder = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
        with Card.open(folder, background=False, user_name="Ann") as other:
            other.import_card(write(tmp_path, "wrapped.json", wrapped_book))
            other.import_card(write(tmp_path, "w.json", world))
            turn = other.chat("c1").preview(said)
            assert turn.lore is not None and list(turn.lore.included) == from_card, said


def test_world_info_round_trip_after_a_hand_edit(tmp_path: Path) -> None:
    with imported(tmp_path, "a", write(tmp_path, "w.json", world_info())) as card:
        book = card.lore
        assert book is not None
        first, *others = book.entries
        changed = LoreEntry(**{**first.__dict__, "keys": ("渡口", "/码头/i"), "order": 3, "content": "改过。",
                               "scan_turns": 2, "whole_word": False, "recursive": False})
        edited = LoreBook((changed, *others), book.name, book.description, book.scan_turns, book.recursion_steps,
                          book.extra)
        card.save_lore(edited)
        assert read_card(card.export_lore(tmp_path / "back.json")).book == edited
