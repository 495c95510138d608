"""Hostile chat files: every failure a ChatImportError naming line and field, nothing written (issue 26, item 4).

Before: a deeply nested value raised RecursionError (and a 150-deep one imported, while
Python 3.12+ also takes the 1,000-deep one 3.11 refuses), a 5000-digit number
ValueError, a ``\\ud800`` escape TreeError, and a named pipe as the source hung.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from liyuan.session import ChatImportError, import_chat
from liyuan.session.imports import ChatReader
from liyuan.session.imports.source import JSON_MAX_DEPTH

HEADER = json.dumps({"user_name": "小满", "character_name": "沈砚"}, ensure_ascii=False)
FIRST = json.dumps({"name": "沈砚", "is_user": False, "mes": "你好"}, ensure_ascii=False)


def _st(third: str) -> str:
    return "\n".join([HEADER, FIRST, third]) + "\n"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE: dict[str, tuple[str, str | None, int, str, str]] = {
    # kind: (file text, format, line, field, words the message must hold)
    "nested 150 deep": (_st('{"name": "小满", "is_user": true, "mes": "好", "extra": {"deep": ' + _nested(150) + "}}"),
                        "sillytavern", 3, "deep", f"嵌套超过 {JSON_MAX_DEPTH} 层"),
    "nested 1,000 deep": (_st('{"name": "小满", "is_user": true, "mes": ' + _nested(1000) + "}"),
                          "sillytavern", 3, "mes", f"嵌套超过 {JSON_MAX_DEPTH} 层"),
    "nested 100,000 deep": (_st('{"name": "小满", "is_user": true, "mes": ' + _nested(100_000) + "}"),
                            "sillytavern", 3, "mes", f"嵌套超过 {JSON_MAX_DEPTH} 层"),
    "nested in an openai array": ('[{"role": "user", "content": "a"},\n{"role": "user", "content": '
                                  + _nested(5000) + "}]", "openai", 2, "content", "嵌套"),
    "5000-digit swipe_id": (_st('{"name": "小满", "is_user": true, "mes": "好", "swipe_id": ' + "1" * 5000 + "}"),
                            "sillytavern", 3, "swipe_id", "数字"),
    "5000-digit unknown field": (_st('{"name": "小满", "is_user": true, "mes": "好", "extra": {"n": -'
                                     + "9" * 5000 + "}}"), "sillytavern", 3, "n", "数字"),
    "5000-digit float": (_st('{"name": "小满", "is_user": true, "mes": "好", "send_date": 1.' + "5" * 5000 + "}"),
                         "sillytavern", 3, "send_date", "数字"),
    "a long number in three short runs": (_st('{"name": "小满", "is_user": true, "mes": "好", "send_date": -'
                                              + "1" * 34 + "." + "2" * 33 + "e+" + "3" * 31 + "}"),
                                          "sillytavern", 3, "send_date", "数字"),
    "lone surrogate in mes": (_st('{"name": "小满", "is_user": true, "mes": "半个\\ud800字"}'), "sillytavern", 3,
                              "mes", "代理项"),
    "lone low surrogate in a name": (_st('{"name": "小\\udc00满", "is_user": true, "mes": "好"}'), "sillytavern",
                                     3, "name", "代理项"),
    "lone surrogate in openai content": ('[{"role": "user",\n "content": "\\ud83d"}]', "openai", 2, "content",
                                         "代理项"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_values_are_a_chat_import_error_naming_line_and_field(tmp_path: Path, kind: str) -> None:
    text, fmt, line, field, words = HOSTILE[kind]
    source = tmp_path / "chat.jsonl"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    for guess in (fmt, None):
        with pytest.raises(ChatImportError) as caught:
            import_chat(ChatReader(source, guess), out / "会话" / "001.jsonl")
        error = caught.value
        assert (error.line, error.field) == (line, field), str(error)
        assert words in str(error) and f"第 {line} 行，字段 {field}" in str(error)
        assert not out.exists()  # nothing written, not even the folder


def test_a_valid_surrogate_pair_and_moderate_nesting_still_import(tmp_path: Path) -> None:
    source = tmp_path / "chat.jsonl"
    source.write_text(_st('{"name": "小满", "is_user": true, "mes": "笑\\ud83d\\ude00", "extra": {"deep": '
                          + _nested(JSON_MAX_DEPTH - 2) + ', "n": ' + "7" * 50 + "}}"), encoding="utf-8")
    import_chat(ChatReader(source, "sillytavern"), tmp_path / "001.jsonl")
    assert "笑😀" in (tmp_path / "001.jsonl").read_text(encoding="utf-8")


def test_the_nesting_limit_does_not_depend_on_the_python_version(tmp_path: Path) -> None:
    reasons = set()
    for depth in (JSON_MAX_DEPTH + 1, 900, 1000, 5000):
        source = tmp_path / f"d{depth}.jsonl"
        source.write_text(_st('{"name": "小满", "is_user": true, "mes": ' + _nested(depth) + "}"), encoding="utf-8")
        with pytest.raises(ChatImportError) as caught:
            import_chat(ChatReader(source, "sillytavern"), tmp_path / f"o{depth}.jsonl")
        reasons.add(str(caught.value))
    assert len(reasons) == 1  # one limit, one message, whatever json itself would take


@pytest.mark.parametrize("kind", ["named pipe", "folder", "device"])
def test_a_source_that_is_not_a_regular_file_is_refused_without_hanging(tmp_path: Path, kind: str) -> None:
    if kind == "named pipe":
        source = tmp_path / "pipe"
        os.mkfifo(source)
    elif kind == "folder":
        source = tmp_path / "folder"
        source.mkdir()
    else:
        source = Path("/dev/zero")
    caught: list[BaseException] = []

    def run() -> None:
        try:
            import_chat(ChatReader(source), tmp_path / "out" / "001.jsonl")
        except BaseException as exc:  # collected for the assertions below
            caught.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader so the daemon thread can end
        if kind == "named pipe":
            with open(source, "wb"):
                pass
        pytest.fail("the import hangs on a source that is not a regular file")
    assert len(caught) == 1 and isinstance(caught[0], ChatImportError), caught
    assert "不是普通文件" in str(caught[0]) and caught[0].line == 0
    assert not (tmp_path / "out").exists()
