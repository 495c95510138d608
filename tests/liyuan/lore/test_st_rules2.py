"""Issue 35 item 4: probability, inclusion groups, delay_until_recursion, delay and the SPEC_V3
decorators @@activate_only_after / @@activate_only_every are obeyed, deterministically
(a seeded roll per chat and turn), on cards written as SillyTavern exports them."""

from __future__ import annotations

from pathlib import Path

from liyuan import Card
from liyuan.lore import LoreBook
from liyuan.lore.activate import activate_entries, turn_segments
from liyuan.lore.cards import card_from_json
from liyuan.lore.match import LoreIndex
from liyuan.lore.rules import TurnPlace

from .cardfiles import st_card, st_entry, write
from .test_st_rules import sent


def test_probability_zero_never_and_a_half_about_half_and_the_same_on_replay(tmp_path: Path) -> None:
    card = st_card([st_entry(0, ["fog"], "Never.", comment="never", probability=0),
                    st_entry(1, ["fog"], "Half.", comment="half", probability=50),
                    st_entry(2, ["fog"], "Always.", comment="always", probability=100)])
    assert "never" not in sent(tmp_path, card, [], "the fog")
    book = card_from_json(card).book
    assert book is not None
    index = LoreIndex(book, ("Ann", "Seraphina"))
    segments = turn_segments([], "the fog", index.max_depth)
    runs = [[hit.title for _, hit in activate_entries(index, segments, place=TurnPlace(f"e{i}", 3, 1))]
            for i in range(200)]
    assert all("always" in titles and "never" not in titles for titles in runs)
    halves = sum("half" in titles for titles in runs)
    assert 70 <= halves <= 130  # 200 turns, p = 0.5
    again = [[hit.title for _, hit in activate_entries(index, segments, place=TurnPlace(f"e{i}", 3, 1))]
             for i in range(200)]
    assert again == runs  # the same place rolls the same


def test_preview_prepare_and_reroll_roll_the_same(tmp_path: Path) -> None:
    card = st_card([st_entry(i, ["fog"], f"E{i}.", comment=f"e{i}", probability=50) for i in range(8)])
    with Card.open(tmp_path / "卡", background=False, user_name="Ann") as opened:
        opened.import_card(write(tmp_path, "c.json", card))
        chat = opened.chat("c1")
        preview = chat.preview("the fog")
        turn = chat.prepare("the fog")
        chat.record("…")
        rerolled = chat.reroll()
    assert preview.lore is not None and turn.lore is not None and rerolled.lore is not None
    assert preview.lore.included == turn.lore.included == rerolled.lore.included
    assert 0 < len(turn.lore.included) < 8 and len(turn.lore.dropped) == 8 - len(turn.lore.included)


def test_an_inclusion_group_lets_one_entry_in(tmp_path: Path) -> None:
    weather = [st_entry(0, ["sky"], "Rain.", comment="rain", group="weather"),
               st_entry(1, ["sky"], "Sun.", comment="sun", group="weather"),
               st_entry(2, ["sky"], "Wind.", comment="wind", group="weather, air")]
    chosen = sent(tmp_path, st_card(weather), [], "look at the sky")
    assert len(chosen) == 1 and chosen[0] in ("rain", "sun", "wind")
    weather[1]["extensions"]["group_override"] = True
    weather[1]["insertion_order"] = 5
    weather[2]["extensions"]["group_override"] = True
    weather[2]["insertion_order"] = 50
    assert sent(tmp_path, st_card(weather), [], "look at the sky") == ["wind"]  # override, highest order
    weighted = [st_entry(0, ["sky"], "Rain.", comment="rain", group="weather", group_weight=0),
                st_entry(1, ["sky"], "Sun.", comment="sun", group="weather", group_weight=100)]
    book = card_from_json(st_card(weighted)).book
    assert book is not None
    index = LoreIndex(book)
    segments = turn_segments([], "sky", index.max_depth)
    for i in range(30):
        assert [h.title for _, h in activate_entries(index, segments, place=TurnPlace(f"x{i}", 1, 0))] == ["sun"]
    scored = [st_entry(0, ["sky", "wet"], "Rain.", comment="rain", group="weather", use_group_scoring=True),
              st_entry(1, ["sky"], "Sun.", comment="sun", group="weather", use_group_scoring=True, group_weight=10**6)]
    book = card_from_json(st_card(scored)).book
    assert book is not None
    index = LoreIndex(book)
    segments = turn_segments([], "a wet sky", index.max_depth)
    for i in range(30):  # rain found two keys, sun one: sun falls whatever its weight
        assert [h.title for _, h in activate_entries(index, segments, place=TurnPlace(f"x{i}", 1, 0))] == ["rain"]


def test_delay_until_recursion_waits_for_another_entrys_content(tmp_path: Path) -> None:
    entries = [st_entry(0, ["storm"], "A storm brings rain.", comment="storm"),
               st_entry(1, ["rain"], "Rain lore.", comment="rain", delay_until_recursion=True)]
    assert sent(tmp_path, st_card(entries), [], "rain again") == []
    assert sent(tmp_path, st_card(entries), [], "a storm and rain") == ["storm", "rain"]


def test_delay_and_the_activate_only_decorators_count_the_chat(tmp_path: Path) -> None:
    entries = [st_entry(0, ["bell"], "Late.", comment="delay", delay=4),
               st_entry(1, ["bell"], "@@activate_only_after 2\nAfter.", comment="after"),
               st_entry(2, ["bell"], "@@activate_only_every 2\nEvery.", comment="every")]
    card = st_card(entries)
    # the greeting is the character's 1st message, the new words the chat's 2nd message
    assert sent(tmp_path, card, [], "the bell") == []
    # after one turn: 4 messages with the new one, 2 of the character's
    assert sent(tmp_path, card, [("hi", "hello")], "the bell") == ["delay", "after", "every"]
    assert sent(tmp_path, card, [("hi", "hello"), ("and", "so")], "the bell") == ["delay", "after"]


def test_sticky_and_cooldown_are_read_back_from_the_branch(tmp_path: Path) -> None:
    """Timers in messages, as SillyTavern counts them; worked out from the branch, so a reroll reads
    them back the same and an edit (another branch) does not see them."""
    card = st_card([st_entry(0, ["fog"], "Fog.", comment="fog", sticky=4, scan_depth=0),
                    st_entry(1, ["bell"], "Bell.", comment="bell", cooldown=4, scan_depth=0)])
    with Card.open(tmp_path / "卡", background=False, user_name="Ann") as opened:
        opened.import_card(write(tmp_path, "c.json", card))
        chat = opened.chat("c1")
        greeting = chat.branch()[-1].id
        first = chat.prepare("the fog and the bell")  # 2 messages: both come in, timers end at 6
        chat.record("ok")
        second = chat.preview("only the bell")  # 4 messages: fog sticky, bell cooling
        chat.prepare("only the bell")
        chat.record("ok")
        rerolled = chat.reroll()
        chat.record("ok again")
        third = chat.preview("the bell")  # 6 messages: both timers ended
        chat.rewind(greeting)
        edited = chat.preview("only the bell")  # another branch: no timer
    for turn in (first, second, rerolled, third, edited):
        assert turn.lore is not None
    assert first.lore.included == ("fog", "bell")  # type: ignore[union-attr]
    assert second.lore.included == ("fog",) == rerolled.lore.included  # type: ignore[union-attr]
    assert third.lore.included == ("bell",) and edited.lore.included == ("bell",)  # type: ignore[union-attr]


def test_the_import_report_tells_obeyed_approximated_kept_and_not_applicable_apart() -> None:
    entry = st_entry(0, ["fog"], "@@depth 3\n@@is_greeting 1\nFog.", comment="fog", probability=40,
                     position=4, depth=2, role=1, sticky=2, delay=3, use_group_scoring=True, scan_depth=3)
    read = card_from_json(st_card([entry, st_entry(1, ["bell"], "Bell.")]))
    notes = {(n.entry, n.field): n.status for n in read.notes}
    assert notes[("fog", "probability")] == "approximated" and notes[("fog", "delay")] == "obeyed"
    assert notes[("fog", "sticky")] == "approximated" and notes[("fog", "scan_depth")] == "approximated"
    assert notes[("fog", "position")] == notes[("fog", "depth")] == notes[("fog", "role")] == "not_applicable"
    assert notes[("fog", "@@depth")] == "not_applicable" and notes[("fog", "@@is_greeting")] == "kept"
    assert notes[("fog", "use_regex")] == "kept" and notes[("fog", "use_group_scoring")] == "obeyed"
    assert not [key for key in notes if key[0] == "bell" and key[1] != "use_regex"]  # defaults ask for nothing
    lines = read.report_lines()
    assert "「fog」probability：近似" in "\n".join(lines) and "「fog」position：不适用" in "\n".join(lines)


def test_activate_dont_activate_and_exclude_keys_decorators(tmp_path: Path) -> None:
    card = st_card([st_entry(0, ["nothing"], "@@activate\nAlways.", comment="always"),
                    st_entry(1, ["fog"], "@@dont_activate\nNever.", comment="never"),
                    st_entry(2, ["fog"], "@@exclude_keys night\nDay fog.", comment="day")])
    assert sent(tmp_path, card, [], "the fog") == ["always", "day"]
    assert sent(tmp_path, card, [], "the fog at night") == ["always"]


def test_the_site_table_lists_every_field_with_the_import_reports_status() -> None:
    """docs/memory.md#lore-fields and liyuan.lore.compat say the same, and every cited test exists."""
    import re

    from liyuan.lore.compat import DECORATORS, FIELDS, status_word
    root = Path(__file__).resolve().parents[3]
    page = (root / "docs" / "memory.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(@*[A-Za-z_]+)` \| ([^|]+) \|", page, re.MULTILINE))
    for name, (status, _how) in {**FIELDS, **DECORATORS}.items():
        assert rows.get(name, "").strip() == status_word(status), name
    tests = "".join(p.read_text(encoding="utf-8") for p in (root / "tests" / "liyuan" / "lore").glob("test_*.py"))
    start = page.index("{ #lore-fields }")
    table = page[start:page.index("\n## ", start)]
    for cited in set(re.findall(r"`(test_[a-z0-9_]+)`", table)):
        assert f"def {cited}(" in tests, cited


def test_an_older_lore_file_with_regex_true_keeps_its_meaning() -> None:
    from liyuan.lore.model import entry_from_dict
    entry = entry_from_dict({"title": "年份", "keys": [r"\d{4}年", "/已是/"], "regex": True})
    assert entry.keys == (r"/\d{4}年/i", "/已是/")
    index = LoreIndex(LoreBook((entry,)))
    assert [h.title for _, h in activate_entries(index, ["那是1987年"])] == ["年份"]


def test_world_info_content_decorators_are_read_as_sillytavern_reads_them() -> None:
    from liyuan.lore.activate import lore_for_turn
    info = {"entries": {"0": {"uid": 0, "key": ["nothing"], "comment": "always", "content": "@@activate\nAlways."},
                        "1": {"uid": 1, "key": ["fog"], "comment": "never", "content": "@@dont_activate\nNever."}}}
    book = card_from_json(info).book
    assert book is not None and book.entries[0].content == "Always." and book.entries[0].constant
    blocks = lore_for_turn(LoreIndex(book), [], "the fog", 2000)
    assert blocks.report.included == ("always",) and "@@" not in blocks.text


def test_after_match_decorators_read_the_branch(tmp_path: Path) -> None:
    card = st_card([st_entry(0, ["fog"], "@@keep_activate_after_match\nKept.", comment="keep", scan_depth=0),
                    st_entry(1, ["fog"], "@@dont_activate_after_match\nOnce.", comment="once", scan_depth=0)])
    assert sent(tmp_path, card, [], "the fog") == ["keep", "once"]
    assert sent(tmp_path, card, [("the fog", "ok")], "a clear day") == ["keep"]
    assert sent(tmp_path, card, [("the fog", "ok")], "the fog again") == ["keep"]
    assert sent(tmp_path, card, [("a clear day", "ok")], "the fog again") == ["keep", "once"]
