"""Importing chats: the three formats, the SillyTavern round trip, bad input, bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from liyuan.clock import counter_ids, fixed_clock
from liyuan.session import ChatImportError, SessionTree, import_chat, read_chat
from liyuan.session.entries import IMPORT_NOTE_TYPE
from liyuan.session.imports import ChatReader, safe_chat_id
from liyuan.story.history import rebuild_history
from liyuan.story.view import story_view

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "sim" / "imports" / "bookshop.jsonl"
OPENAI = ROOT / "sim" / "imports" / "bookshop-openai.json"
TRANSCRIPT = ROOT / "sim" / "imports" / "bookshop-transcript.txt"


def run_import(source: Path, target: Path, fmt: str | None = None, **options: object) -> SessionTree:
    import_chat(ChatReader(source, fmt, **options), target, clock=fixed_clock(),  # type: ignore[arg-type]
                ids=counter_ids("i-"))
    return SessionTree(target)


def st_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


# -- the SillyTavern fixture round-trips ------------------------------------------------


def test_sillytavern_fixture_round_trips(tmp_path: Path) -> None:
    """Every message and every swipe is on some branch; the chosen swipes are on the main one."""
    records = st_lines(FIXTURE)
    header, messages = records[0], records[1:]
    assert header["user_name"] == "小满"
    tree = run_import(FIXTURE, tmp_path / "s.jsonl")
    assert tree.problems == []
    main = tree.branch()
    main_texts = [e.text if e.type == "message" else e.data.get("text") for e in main]
    all_texts = Counter(e.text if e.type == "message" else str(e.data.get("text")) for e in tree)
    swipes_total = 0
    for record in messages:
        assert record["mes"] in main_texts  # the shown text of every message is on the main branch
        swipes = record.get("swipes") or []
        if len(swipes) > 1:
            swipes_total += len(swipes) - 1
            for index, text in enumerate(swipes):
                assert all_texts[text] >= 1, f"swipe {index} of {record['mes'][:10]} lost"
            assert swipes[record["swipe_id"]] == record["mes"]
    # the fixture has what the task asks for: swipes, a non-zero chosen swipe, a system message
    assert len(messages) == 80
    assert swipes_total == 8
    assert sum(1 for r in messages if r.get("is_system")) == 3
    assert sum(1 for r in messages if (r.get("swipe_id") or 0) > 0) == 2
    # entries: one per message on the main branch plus one per unchosen swipe on a side branch
    assert len(main) == 80
    assert len(tree) == 80 + swipes_total
    side = [e for e in tree if e not in main]
    assert len(side) == swipes_total
    for entry in side:  # a reroll: a sibling of the chosen entry, same parent
        chosen = next(e for e in main if e.parent_id == entry.parent_id)
        assert chosen.role == entry.role and chosen.body.get("swipe") != entry.body.get("swipe")


def test_greeting_swipes_are_sibling_greetings(tmp_path: Path) -> None:
    tree = run_import(FIXTURE, tmp_path / "s.jsonl")
    roots = [e for e in tree if e.parent_id is None]
    assert len(roots) == 3 and all(e.body.get("greeting") is True for e in roots)
    first = tree.branch()[0]
    assert first.body.get("swipe") == 1 and first.text.startswith("（旧书店的卷帘门拉下一半")


def test_system_narrator_and_hidden_messages_stay_out_of_the_story(tmp_path: Path) -> None:
    tree = run_import(FIXTURE, tmp_path / "s.jsonl")
    notes = [e for e in tree.branch() if e.custom_type == IMPORT_NOTE_TYPE]
    assert [n.data["kind"] for n in notes] == ["comment", "narrator", "hidden"]
    assert notes[2].data["role"] == "user"
    view_text = "\n".join(e.text for e in story_view(tree.branch()))
    history = "\n".join(item.text for item in rebuild_history(tree.branch()).items)
    for note in notes:
        assert note.data["text"] not in view_text
        assert note.data["text"] not in history
    assert "卷帘门" in history  # the story itself is there


def test_read_chat_gives_the_same_chat_as_data() -> None:
    chat = read_chat(FIXTURE)
    source = chat.source
    assert (source.format, source.messages, source.swipes, source.notes) == ("sillytavern", 80, 8, 3)
    assert (source.user_name, source.char_name) == ("小满", "沈砚")
    assert len(source.sha256) == 64
    assert chat.messages[0].greeting and len(chat.messages[0].swipes) == 3
    assert sum(m.greeting for m in chat.messages) == 1
    assert "path" not in source.to_json() and str(FIXTURE) not in json.dumps(source.to_json())


# -- the other formats ----------------------------------------------------------------


def test_openai_log_imports(tmp_path: Path) -> None:
    tree = run_import(OPENAI, tmp_path / "s.jsonl")
    main = tree.branch()
    assert main[0].custom_type == IMPORT_NOTE_TYPE and main[0].data["role"] == "system"
    assert main[1].role == "assistant" and main[1].body.get("greeting") is True
    assert main[2].role == "user"
    assert main[3].text.startswith("（沈砚放下笔）")  # a content-parts message, joined
    assert len(main) == 26


def test_openai_jsonl_of_conversations_picks_one(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"第{i}段"}, {"role": "assistant", "content": "好"}]}
            for i in (1, 2, 3)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    chat = read_chat(path, conversation=2)
    assert chat.source.conversations == 3 and chat.messages[0].text == "第2段"
    with pytest.raises(ChatImportError, match="没有第 4 段"):
        read_chat(path, conversation=4)


def test_openai_jsonl_of_bare_messages_is_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    rows = [{"role": "user", "content": "在吗"}, {"role": "assistant", "content": [{"type": "text", "text": "在"}]}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    chat = read_chat(path)
    assert [m.text for m in chat.messages] == ["在吗", "在"] and chat.source.conversations == 1


def test_transcript_imports_with_continued_paragraphs(tmp_path: Path) -> None:
    tree = run_import(TRANSCRIPT, tmp_path / "s.jsonl")
    main = tree.branch()
    assert main[0].role == "assistant" and main[0].body.get("greeting") is True
    assert main[1].role == "user" and main[1].body["name"] == "小满"
    assert main[4].text.endswith("门口那盆文竹，也别浇太多水。")  # a block without a speaker continues
    assert len(main) == 21


def test_transcript_user_name_decides_the_roles(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("阿简：你好。\n\n林溯：进来吧。\n", "utf-8")
    assert [m.role for m in read_chat(path).messages] == ["assistant", "user"]
    assert [m.role for m in read_chat(path, user_name="阿简").messages] == ["user", "assistant"]


def test_names_map_to_valid_chat_ids() -> None:
    assert safe_chat_id("jA") == "jA"
    for name in ("雾夜借宿", "../../etc", "a b", "林溯", "阿简", "x" * 80):
        chat_id = safe_chat_id(name)
        assert chat_id and all(c.isascii() and (c.isalnum() or c in "-_") for c in chat_id)
        assert len(chat_id) <= 40
    assert safe_chat_id("林溯") != safe_chat_id("阿简")


# -- bad input: a clear error, nothing written --------------------------------------


ST_HEADER = json.dumps({"user_name": "小满", "character_name": "沈砚"}, ensure_ascii=False)
ST_OK = json.dumps({"name": "沈砚", "is_user": False, "mes": "你好"}, ensure_ascii=False)


def st(*rows: object) -> bytes:
    return "\n".join([ST_HEADER, ST_OK, *(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)
                                          for r in rows)]).encode("utf-8")


BAD_INPUTS: dict[str, tuple[bytes, str | None, int, str, str]] = {
    # kind: (file bytes, format, line, field, words the message must hold)
    "empty file": (b"", None, 0, "", "空的"),
    "blank file": (b"\n  \n\t\n", None, 0, "", "空的"),
    "not utf-8": (ST_HEADER.encode() + b"\n" + "沈砚：你好".encode("gbk") + b"\n", "sillytavern", 2, "", "UTF-8"),
    "utf-16 file": ("小满：你好\n".encode("utf-16"), None, 1, "", "UTF-8"),
    "broken json line": (st('{"name": "小满", "is_user": true, "mes": "半截'), "sillytavern", 3, "", "JSON"),
    "message without mes": (st({"name": "小满", "is_user": True}), "sillytavern", 3, "mes", "缺少"),
    "mes not a string": (st({"name": "小满", "is_user": True, "mes": 42}), "sillytavern", 3, "mes", "字符串"),
    "is_user not a bool": (st({"name": "小满", "is_user": "yes", "mes": "好"}), "sillytavern", 3, "is_user",
                           "true/false"),
    "swipe_id out of range": (st({"name": "沈砚", "mes": "甲", "swipes": ["甲", "乙"], "swipe_id": 5}),
                              "sillytavern", 3, "swipe_id", "超出"),
    "swipes not strings": (st({"name": "沈砚", "mes": "甲", "swipes": ["甲", 2], "swipe_id": 0}),
                           "sillytavern", 3, "swipes", "字符串列表"),
    "header only": (ST_HEADER.encode() + b"\n", "sillytavern", 0, "", "没有任何消息"),
    "unknown role": (json.dumps([{"role": "user", "content": "嗨"}, {"role": "wizard", "content": "?"}]).encode(),
                     "openai", 1, "role", "wizard"),
    "content of the wrong type": (b'[\n{"role": "user",\n "content": 7}\n]', "openai", 2, "content", "字符串"),
    "truncated json array": (b'[\n{"role": "user", "content": "a"},\n{"role": "assistant", "con', "openai", 3, "",
                             "没有写完"),
    "trailing comma": (b'[{"role": "user", "content": "a"},\n]', "openai", 2, "", "逗号"),
    "message not an object": (b'[{"role": "user", "content": "a"}, "b"]', "openai", 1, "", "JSON 对象"),
    "transcript without speaker": ("只是一段话，没有说话人\n".encode(), "transcript", 1, "", "说话人"),
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_bad_input_names_line_and_field_and_writes_nothing(tmp_path: Path, kind: str) -> None:
    data, fmt, line, field, words = BAD_INPUTS[kind]
    source = tmp_path / "in" / "chat.jsonl"
    source.parent.mkdir()
    source.write_bytes(data)
    out = tmp_path / "out"
    with pytest.raises(ChatImportError) as caught:
        import_chat(ChatReader(source, fmt), out / "sessions" / "001.jsonl")
    error = caught.value
    assert (error.line, error.field) == (line, field), str(error)
    assert words in str(error)
    assert (f"第 {line} 行" if line else "文件") in str(error)
    if field:
        assert f"字段 {field}" in str(error)
    assert not out.exists()  # not even the folder


def test_a_line_too_long_is_refused_without_reading_on(tmp_path: Path) -> None:
    source = tmp_path / "chat.jsonl"
    source.write_text(ST_HEADER + "\n" + ST_OK + "\n" + json.dumps({"mes": "长" * 5000}) + "\n", "utf-8")
    reader = ChatReader(source, "sillytavern", max_value_chars=1000)
    with pytest.raises(ChatImportError, match="超过 1000 个字符") as caught:
        reader.scan()
    assert caught.value.line == 3


def test_an_existing_session_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "001.jsonl"
    target.write_text("mine\n", "utf-8")
    with pytest.raises(ChatImportError, match="已经存在"):
        import_chat(ChatReader(FIXTURE), target)
    assert target.read_text("utf-8") == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["001.jsonl"]


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ChatImportError, match="不认识的格式"):
        import_chat(ChatReader(FIXTURE, "tavernai"), tmp_path / "s.jsonl")
    assert list(tmp_path.iterdir()) == []


# -- streaming ------------------------------------------------------------------------


def _big_chat(path: Path, megabytes: int) -> int:
    line = json.dumps({"name": "沈砚", "is_user": False, "mes": "雨下了一整夜，书店的灯一直亮着。" * 20},
                      ensure_ascii=False)
    count = megabytes * (1 << 20) // (len(line.encode()) + 1)
    with path.open("w", encoding="utf-8") as handle:
        handle.write(ST_HEADER + "\n")
        for _ in range(count):
            handle.write(line + "\n")
    return count


def _scan_peak(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        source = ChatReader(path, "sillytavern").scan()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return source.messages, peak


def test_memory_stays_bounded_while_reading_a_large_file(tmp_path: Path) -> None:
    """Four times the file, the same peak: the file is streamed, never held whole.

    The peak is the read chunk (1 MB) and its decoded lines, whatever the file's size,
    so a 200 MB chat needs no more memory to read than these.
    """
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small_count, large_count = _big_chat(small, 4), _big_chat(large, 16)
    messages_small, peak_small = _scan_peak(small)
    messages_large, peak_large = _scan_peak(large)
    assert (messages_small, messages_large) == (small_count, large_count)
    assert peak_large < peak_small * 1.25 + (256 << 10), (peak_small, peak_large)
    assert peak_large < 8 * (1 << 20), f"peak {peak_large / (1 << 20):.1f} MB for a 16 MB file"


def test_a_one_line_json_array_streams_element_by_element(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    rows = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"第 {i} 句"} for i in range(3000)]
    path.write_text(json.dumps(rows, ensure_ascii=False), "utf-8")
    reader = ChatReader(path)
    reader._text.chunk_bytes = 4096  # many chunk borders inside values
    texts = [m.text for m in reader.messages()]
    assert texts == [r["content"] for r in rows]


def test_the_import_fsyncs_its_file_once_not_per_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file is no session until linked: one fsync before the link, not one per entry."""
    import os

    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    run_import(FIXTURE, tmp_path / "s.jsonl")
    assert 1 <= len(calls) <= 3  # the file, and the folder after the link
    calls.clear()
    tree = SessionTree(tmp_path / "other.jsonl")  # an ordinary tree still fsyncs every append
    tree.append_message("user", "你好")
    tree.append_message("assistant", "好")
    assert len(calls) == 3


def test_two_threads_importing_into_one_session_file_leave_one_whole_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from liyuan.session.imports import reader as reader_module

    both_writing = threading.Barrier(2, timeout=10)
    write = reader_module.write_messages

    def in_step(*args: object, **kwargs: object) -> object:
        both_writing.wait()  # both imports have their temporary file before either writes
        return write(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader_module, "write_messages", in_step)
    target = tmp_path / "sessions" / "001.jsonl"
    results: list[object] = []

    def run() -> None:
        try:
            results.append(import_chat(ChatReader(FIXTURE), target, clock=fixed_clock(), ids=counter_ids("i")))
        except Exception as exc:  # the loser's error is part of what is checked
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(results) == 2 and len(errors) == 1
    assert isinstance(errors[0], ChatImportError) and "已经存在" in str(errors[0])
    alone = tmp_path / "alone.jsonl"
    monkeypatch.setattr(reader_module, "write_messages", write)
    import_chat(ChatReader(FIXTURE), alone, clock=fixed_clock(), ids=counter_ids("i"))
    assert target.read_bytes() == alone.read_bytes()  # one whole import, nothing interleaved
    assert [p.name for p in target.parent.iterdir()] == ["001.jsonl"]  # no temporary file left
