"""The names in a chat's summaries and the card's recaps are the same names (issue 27).

Recaps and merges are card-wide and use the card's names; a chat opened with other names
would summarise under one name and recap under another (the recap prompt got an empty
character name when the facade example passed the names to ``card.chat``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan import Card, ConfigError

from .test_chat import open_card


def test_names_other_than_the_cards_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    card = Card.open(tmp_path / "cards" / "雾港", background=False)
    with pytest.raises(ConfigError, match=r"Card\.open"):
        card.chat("jA", user_name="阿简", char_name="林溯")
    assert not (tmp_path / "cards" / "雾港" / "对话").exists()
    assert card.chat_ids() == []


def test_the_cards_own_names_may_be_repeated(tmp_path: Path) -> None:
    card = open_card(tmp_path, background=False)
    chat = card.chat("jA", user_name="阿简", char_name="林溯")
    assert (chat.user_name, chat.char_name) == ("阿简", "林溯") == (card.user_name, card.char_name)
    assert card.chat("jB").char_name == "林溯"
