"""Hostile lore files and cards (issue 37, items 1-3): nothing raw, nothing half written.

- A hand-edited 设定集.yaml whose aliases expand past a bound is refused with a LoreError
  naming the file, and the chat goes on without lore (an activity line says why).
- A regex key nested thousands deep is refused on import (never a raw RecursionError) and,
  in a hand-edited book, costs the turn its lore with an activity line, never the turn.
- An import is all or nothing: a lone surrogate or a field nested too deep is a
  CardImportError naming the field, before anything is written; the fixed card then imports.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from liyuan import Activity, Card, CardImportError
from liyuan.errors import LoreError
from liyuan.lore import LORE_FILE, load_book

from .cardfiles import v2_card, world_info

DEEP = 5000


def open_card(tmp_path: Path, seen: list[Activity]) -> Card:
    return Card.open(tmp_path / "雾港", user_name="阿简", char_name="林溯", background=False,
                     on_activity=seen.append)


def laughs(entries: int = 1200, levels: int = 9) -> str:
    """A billion-laughs book: 10**levels strings under one alias, the same entry ``entries`` times."""
    lines = ["extra:", "  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for n in range(1, levels):
        lines.append(f"  l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]")
    lines.append("entries:")
    lines.append(f"- &e {{title: 笑, keys: [雾港], content: 雾, extra: {{x: *l{levels - 1}}}}}")
    lines.append("- " + "\n- ".join(["*e"] * (entries - 1)))
    return "\n".join(lines) + "\n"


def test_a_book_of_aliases_is_refused_naming_the_file_and_the_chat_goes_on_without_lore(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    text = laughs()
    assert len(text.encode()) < 8_000  # 6.6 KB in the report
    (card.path / LORE_FILE).write_text(text, encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(LoreError, match=LORE_FILE) as refused:
        load_book(card.path)
    assert "别名" in str(refused.value)
    turn = card.chat("jA").prepare("去雾港。")
    assert time.monotonic() - started < 10
    assert turn.lore is None and "【相关设定】" not in turn.messages[-1].content
    errors = [a.text for a in seen if a.kind == "error"]
    assert errors and LORE_FILE in errors[0] and "别名" in errors[0]
    card.close()


def test_a_few_aliases_a_person_wrote_still_read(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    (card.path / LORE_FILE).write_text(
        "entries:\n- {title: 雾港, keys: &k [雾港, 港口], content: 终年起雾。}\n"
        "- {title: 码头, keys: *k, content: 夜里不开船。}\n",
        encoding="utf-8")
    book = load_book(card.path)
    assert book is not None and [e.keys for e in book.entries] == [("雾港", "港口"), ("雾港", "港口")]
    card.close()


def nested_key(depth: int = DEEP) -> str:
    return "(" * depth + "雾" + ")" * depth


def test_a_regex_key_nested_thousands_deep_is_refused_on_import_never_raw(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    world = world_info()
    world["entries"]["1"]["key"] = [f"/{nested_key()}/"]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(world, ensure_ascii=False), encoding="utf-8")
    try:
        imported = card.import_card(path)
    except CardImportError as exc:  # refused whole, naming the entry
        assert "世界书第 2 条" in str(exc)
        assert not (card.path / LORE_FILE).exists()
    else:  # or the key is left out of the book (the entry kept, its key reported)
        assert imported.book is not None
        assert all(nested_key() not in key for entry in imported.book.entries for key in entry.keys)
    card.close()


def test_a_hand_edited_book_with_such_a_key_costs_the_turn_its_lore_not_the_turn(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    (card.path / LORE_FILE).write_text(
        "entries:\n- title: 雾港\n  keys: [雾港]\n  content: 终年起雾。\n"
        f"- title: 深\n  regex: true\n  keys: ['{nested_key()}']\n  content: 不会出现。\n", encoding="utf-8")
    chat = card.chat("jA")
    for words in ("去雾港。", "再去雾港。"):
        turn = chat.prepare(words)  # never a RecursionError
        chat.record("好。")
        assert turn.lore is None
    errors = [a.text for a in seen if a.kind == "error"]
    assert len(errors) == 2 and all(LORE_FILE in e and "深" in e for e in errors)
    card.close()


def surrogate_card(where: str) -> dict[str, Any]:
    card = v2_card()
    if where == "description":
        card["data"]["description"] = "守夜人\ud800"
    else:
        card["data"]["character_book"]["entries"][1]["content"] = "灯塔\ud800每夜亮到三更。"
    return card


@pytest.mark.parametrize(("where", "field"), [("description", "data.description"),
                                              ("entry", "data.character_book.entries[1].content")])
def test_a_lone_surrogate_is_refused_naming_the_field_and_nothing_is_written(
        tmp_path: Path, where: str, field: str) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(surrogate_card(where)), encoding="ascii")  # legal JSON: the escape "\ud800"
    with pytest.raises(CardImportError, match=field.replace("[", r"\[").replace("]", r"\]")):
        card.import_card(path)
    assert sorted(p.name for p in card.path.iterdir() if not p.name.startswith(".")) == []
    fixed = v2_card()
    path.write_text(json.dumps(fixed), encoding="ascii")
    imported = card.import_card(path)  # the corrected card imports: nothing was left half written
    assert imported.book is not None and (card.path / LORE_FILE).exists()
    card.close()


def test_a_field_nested_800_deep_in_a_world_book_is_refused_naming_it(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = open_card(tmp_path, seen)
    world = world_info()
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(800):
        node["a"] = {}
        node = node["a"]
    world["entries"]["0"]["extensions"] = deep
    path = tmp_path / "w.json"
    path.write_text(json.dumps(world, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(CardImportError, match=r"entries\.0\.extensions"):
        card.import_card(path)
    assert not (card.path / LORE_FILE).exists()
    card.close()
