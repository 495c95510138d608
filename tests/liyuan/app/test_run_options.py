"""How a card runs (issue 40): one RunOptions object, which Card.open also takes by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan.app.card import Card, RunOptions
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import ConfigError


def test_the_switches_by_name_and_as_one_object_open_the_same_card(tmp_path: Path) -> None:
    ids = []
    for folder, options in (("by-name", {"background": False, "auto_sync": False, "clock": fixed_clock(),
                                         "ids": counter_ids("e")}),
                            ("as-one", {"run": RunOptions(background=False, auto_sync=False, clock=fixed_clock(),
                                                          ids=counter_ids("e"))})):
        with Card.open(tmp_path / folder, **options) as card:  # type: ignore[arg-type]
            assert card._worker is None and not card._auto_sync  # inline, no sync on entering
            chat = card.chat("jA")
            chat.prepare("我把伞递给她。")
            ids.append([(e.id, e.body.get("timestamp")) for e in chat.tree.entries()])
    assert ids[0] == ids[1] and ids[0][0][0] == "e0001"


def test_a_switch_given_twice_or_a_wrong_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="background"):
        Card.open(tmp_path / "c", run=RunOptions(), background=False)
    with pytest.raises(ConfigError, match="RunOptions"):
        Card.open(tmp_path / "c", run={"background": False})  # type: ignore[arg-type]
