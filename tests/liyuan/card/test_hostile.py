"""Hostile input for the loaders documented never to crash (issue 14, part 6).

Before: a 1,000-deep or 5,000-digit JSON value crashed meta.json, the manifest and the
vector config (RecursionError, ValueError), one such line blocked every sync of the
card, and Windows device names were accepted as chat ids. Every reply here is a
hand-written stand-in, not model output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan.card.layout import CardLayout, is_valid_chat_id, validate_chat_id
from liyuan.card.sessions import FileSessions, chat_name
from liyuan.errors import ConfigError
from liyuan.model import FunctionModel, ModelRequest
from liyuan.vector.config_file import load_config

from .test_fixtures import memory, merge_for, recap, write_chat

DEEP = '{"name": ' + "[" * 1000 + "]" * 1000 + "}"
HUGE = '{"name": ' + "9" * 5000 + "}"
HOSTILE = pytest.mark.parametrize("text", [DEEP, HUGE], ids=["1000-deep", "5000-digits"])


@HOSTILE
def test_meta_json_falls_back_to_the_id(tmp_path: Path, text: str) -> None:
    (tmp_path / "对话" / "jA").mkdir(parents=True)
    (tmp_path / "对话" / "jA" / "meta.json").write_text(text, encoding="utf-8")
    assert chat_name(FileSessions(CardLayout(tmp_path)), "jA") == "jA"


@HOSTILE
def test_vector_config_gives_a_config_error(tmp_path: Path, text: str) -> None:
    # Python 3.11's parser refuses 1,000-deep nesting, 3.12 and 3.13 parse it: then the
    # unknown key is refused instead. A ConfigError naming the file either way.
    path = tmp_path / "vector-memory.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"向量记忆配置文件(无法读取|有误)（.*vector-memory\.json）"):
        load_config(path)


@HOSTILE
def test_one_hostile_chat_does_not_block_the_card(tmp_path: Path, text: str) -> None:
    write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")], name="甲")
    write_chat(tmp_path, "jB", [("user", "乙的第1拍。"), ("assistant", "好。")])
    (tmp_path / "对话" / "jB" / "meta.json").write_text(text, encoding="utf-8")
    session = tmp_path / "对话" / "jB" / "会话" / "s1.jsonl"
    session.write_text(session.read_text(encoding="utf-8") + text.replace('"name"', '"x"') + "\n", encoding="utf-8")

    def fn(request: ModelRequest) -> str:
        return recap("一局", "- 一") if request.purpose == "recap" else merge_for("jA", "jB")

    out = memory(tmp_path, FunctionModel(fn)).sync()
    assert (out.recapped, out.merged) == (["jA", "jB"], "ok")


@pytest.mark.parametrize("chat_id", ["con", "CON", "Nul", "prn", "aux", "com1", "COM9", "lpt1", "Lpt9", "com0"])
def test_windows_device_names_are_refused_as_chat_ids(chat_id: str) -> None:
    with pytest.raises(ConfigError, match="Windows"):
        validate_chat_id(chat_id)
    assert not is_valid_chat_id(chat_id)


@pytest.mark.parametrize("chat_id", ["cons", "console", "com", "com10", "lpt", "nul_", "aux-1"])
def test_names_that_only_resemble_device_names_are_fine(chat_id: str) -> None:
    assert validate_chat_id(chat_id) == chat_id


def test_a_chat_folder_named_like_a_device_is_not_a_chat(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "一。"), ("assistant", "好。")])
    (tmp_path / "对话" / "con" / "会话").mkdir(parents=True)
    assert CardLayout(tmp_path).chat_ids() == ["jA"]
