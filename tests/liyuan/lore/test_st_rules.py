"""Cards as SillyTavern exports them behave as their authors saw them there (issue 35):
keys (plain words, ``/pattern/flags`` regexes), budget order, recursion, names in the scan.

Every card here is written as SillyTavern's exporter writes it (:func:`cardfiles.st_entry`),
and what an entry does is read from what ``Chat.preview`` would send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liyuan import Card
from liyuan.lore.cards import card_from_json

from .cardfiles import st_card, st_entry, world_info, write


def sent(tmp_path: Path, card: dict[str, Any], turns: list[tuple[str, str]], new: str, *,
         budget_chars: int | None = None, char_name: str = "") -> list[str]:
    """Titles of the entries whose text a turn sends, after ``turns`` (user, reply) were played."""
    from liyuan import MemoryConfig
    config = MemoryConfig(budget_chars=budget_chars) if budget_chars else None
    folder = tmp_path / f"卡{len(list(tmp_path.iterdir()))}"
    with Card.open(folder, background=False, user_name="Ann", config=config, char_name=char_name) as opened:
        opened.import_card(write(tmp_path, "card.json", card))
        chat = opened.chat("c1")
        for user, reply in turns:
            chat.prepare(user)
            chat.record(reply)
        turn = chat.preview(new)
        assert turn.lore is not None
        return list(turn.lore.included)


def test_exported_bare_keys_are_plain_whole_words(tmp_path: Path) -> None:
    """Item 1: ``use_regex: true`` (written on every exported entry) does not make bare keys regexes."""
    card = st_card([st_entry(0, ["Forest"], "The forest."), st_entry(1, ["power"], "Power."),
                    st_entry(2, ["wood"], "Wood."), st_entry(3, ["place3"], "P3."), st_entry(4, ["place39"], "P39."),
                    st_entry(5, ["place399"], "P399."), st_entry(6, ["C++"], "C plus plus."),
                    st_entry(7, ["[Secret]"], "The secret."), st_entry(8, [":("], "Sad face.")])
    said = "A Forester with powers saw a woodpecker at place399. I like cats. Hello there."
    assert sent(tmp_path, card, [], said) == ["place399"]
    assert sent(tmp_path, card, [], "I code C++ and keep a [Secret] :(") == ["C++", "[Secret]", ":("]


def test_slash_keys_are_regexes_with_their_flags_on_both_paths(tmp_path: Path) -> None:
    """Item 2: ``/pattern/flags`` is a regex (slashes stripped, flags honoured) with or without ``use_regex``."""
    entries = [st_entry(0, ["/drag(on|ons)/i"], "Scales.", comment="dragons"),
               st_entry(1, ["/Dragon/"], "Wings.", comment="capital"),
               st_entry(2, ["/^dragon$/m"], "Fire.", comment="line")]
    entries[2]["use_regex"] = False  # SillyTavern's own way of writing a regex key needs no use_regex
    card = st_card(entries)
    assert sent(tmp_path, card, [], "Two DRAGONS") == ["dragons"]
    assert sent(tmp_path, card, [], "A Dragon") == ["dragons", "capital"]
    assert sent(tmp_path, card, [], "look\ndragon\nthere") == ["dragons", "line"]
    info = world_info()
    info["entries"] = {"0": {"uid": 0, "key": ["/Dragon/"], "comment": "capital", "content": "Capital.", "order": 100},
                       "1": {"uid": 1, "key": ["/^dragon$/m"], "comment": "line", "content": "Line.", "order": 100}}
    book = card_from_json(info).book
    assert book is not None
    from liyuan.lore.activate import lore_for_turn
    from liyuan.lore.match import LoreIndex
    index = LoreIndex(book)
    assert lore_for_turn(index, [], "a dragon", 2000).report.included == ()
    assert lore_for_turn(index, [], "a Dragon", 2000).report.included == ("capital",)
    assert lore_for_turn(index, [], "see\ndragon", 2000).report.included == ("line",)


def test_a_key_that_does_not_compile_is_skipped_and_reported(tmp_path: Path) -> None:
    """Item 1: one bad ``/…/`` key never fails the import; its entry keeps its other keys."""
    card = st_card([st_entry(0, ["/drag(on/i", "wyrm"], "Wyrm.", comment="wyrm"), st_entry(1, ["elf"], "Elf.")])
    imported = card_from_json(card)
    assert imported.book is not None and imported.book.entries[0].keys == ("wyrm",)
    assert any("/drag(on/i" in line and "wyrm" in line for line in imported.report_lines())
    assert sent(tmp_path, card, [], "a wyrm and an elf") == ["wyrm", "elf"]


def test_tight_budget_keeps_the_highest_order_on_both_paths(tmp_path: Path) -> None:
    """Item 3: SillyTavern keeps the highest ``order`` first; a card's ``insertion_order`` without
    ``priority`` means the same (SPEC_V3: drop the lowest ``insertion_order`` first)."""
    entries = [st_entry(i, ["harbor"], f"{'x' * 300}", order=order, comment=f"o{order}")
               for i, order in enumerate((10, 30, 20))]
    assert sent(tmp_path, st_card(entries), [], "the harbor", budget_chars=1750)[:2] == ["o30", "o20"]
    info = {"entries": {str(i): {"uid": i, "key": ["harbor"], "comment": f"o{order}", "content": "x" * 300,
                                 "order": order} for i, order in enumerate((10, 30, 20))}}
    book = card_from_json(info).book
    assert book is not None
    from liyuan.lore.activate import lore_for_turn
    from liyuan.lore.match import LoreIndex
    assert lore_for_turn(LoreIndex(book), [], "the harbor", 700).report.included == ("o30", "o20")


def chain(links: int) -> list[dict[str, Any]]:
    """``links`` entries, each one's content naming the next one's key."""
    return [st_entry(i, [f"link{i}"], f"see link{i + 1}", comment=f"L{i}") for i in range(links)]


def test_recursion_is_on_unless_the_card_says_no_and_a_seven_link_chain_works(tmp_path: Path) -> None:
    """Item 5: a fresh SillyTavern recurses; the card exporter never writes ``recursive_scanning``."""
    assert sent(tmp_path, st_card(chain(7)), [], "start at link0") == [f"L{i}" for i in range(7)]
    assert sent(tmp_path, st_card(chain(7), recursive_scanning=False), [], "start at link0") == ["L0"]


def test_recursion_stays_bounded_on_a_hostile_book() -> None:
    """Item 5: the step bound holds (a 200-link chain stops after MAX_RECURSION_STEPS steps)."""
    from liyuan.lore.activate import activate_entries, turn_segments
    from liyuan.lore.match import LoreIndex
    from liyuan.lore.model import MAX_RECURSION_STEPS
    book = card_from_json(st_card(chain(200))).book
    assert book is not None
    index = LoreIndex(book)
    found = activate_entries(index, turn_segments([], "link0", index.max_depth))
    assert len(found) == 1 + MAX_RECURSION_STEPS and MAX_RECURSION_STEPS >= 6


def test_scanned_messages_carry_the_speakers_name(tmp_path: Path) -> None:
    """Item 6: SillyTavern scans ``name: message``; an entry keyed on a name fires when that one speaks."""
    card = st_card([st_entry(0, ["Seraphina"], "Her lore.", comment="char"),
                    st_entry(1, ["Ann"], "The user's lore.", comment="user"),
                    st_entry(2, ["Bob"], "Nobody.", comment="other")])
    card["data"]["first_mes"] = "Welcome."
    assert sent(tmp_path, card, [], "hello", char_name="Seraphina") == ["char", "user"]


def test_a_key_of_several_words_followed_by_a_letter(tmp_path: Path) -> None:
    """Item 6: ``red dragon`` is found in "red dragons", as SillyTavern finds it; one word still is not."""
    card = st_card([st_entry(0, ["red dragon"], "Red.", comment="red"), st_entry(1, ["wyrm"], "W.", comment="w")])
    assert sent(tmp_path, card, [], "two red dragons and wyrms") == ["red"]
    for entry in card["data"]["character_book"]["entries"]:
        entry["use_regex"] = False  # as a V3 tool writes it: the same
    assert sent(tmp_path, card, [], "two red dragons and wyrms") == ["red"]
