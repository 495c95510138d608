"""Issue 14, item 1: whatever the side model raises, a side call is an outcome, never an exception.

Every reply here is hand-written (FunctionModel); no model wrote it. The exceptions are
the kinds a flaky deployment produced: a timeout, a reset connection, a bug inside a
model adapter, a surrogate the transport could not encode, and a reply holding a lone
surrogate (which no file can store as UTF-8).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan.discussion.compact import run_discussion_compaction
from liyuan.errors import ModelError, ModelOutputError
from liyuan.model import Completion, FunctionModel, ModelRequest
from liyuan.story.compact import CompactionSettings, compact_now, run_compaction
from liyuan.story.view import COMPACT_FAILED_TYPE, SUMMARY_ENTRY_TYPE
from tests.liyuan.branches import SUMMARY_REPLY, story_turns, tree_of
from tests.liyuan.card.test_fixtures import RECAP_A, RECAP_A2, memory, merge_reply, recap, two_chats, write_chat
from tests.liyuan.discussion.test_compact import tree_with, turns

LONE = "\ud83c"


def failures() -> list[BaseException | str]:
    """What the side model did; ``"surrogate"`` stands for a reply holding a lone surrogate."""
    return [TimeoutError("读超时"), ConnectionResetError(104, "连接被重置"), RuntimeError(f"适配器坏了{LONE}"),
            UnicodeEncodeError("utf-8", LONE, 0, 1, "surrogates not allowed"), "surrogate"]


IDS = ["timeout", "reset", "runtime", "encode", "surrogate"]


def failing(failure: BaseException | str, good_reply: str) -> Callable[[ModelRequest], str]:
    def reply(_request: ModelRequest) -> str:
        if isinstance(failure, BaseException):
            raise failure
        return good_reply.replace("。", f"。{LONE}", 1)
    return reply


def snapshot(card: Path) -> dict[str, bytes]:
    folder = card / "记忆"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("failure", failures(), ids=IDS)
@pytest.mark.parametrize("manual", [False, True], ids=["auto", "compact_now"])
def test_story_compaction_turns_any_model_failure_into_a_failed_outcome(
        failure: BaseException | str, manual: bool) -> None:
    tree = tree_of(story_turns(1, 40))
    lines: list[str] = []
    model = FunctionModel(failing(failure, SUMMARY_REPLY))
    run = compact_now if manual else run_compaction
    outcome = run(tree, model, CompactionSettings(user_name="旅人", char_name="阿箬"), on_activity=lines.append)
    assert outcome.kind == "failed" and outcome.entry is None
    assert outcome.reason == ("invalid-summary" if failure == "surrogate" else "model-error")
    types = [e.custom_type for e in tree.entries()]
    assert SUMMARY_ENTRY_TYPE not in types
    assert types.count(COMPACT_FAILED_TYPE) == 1  # counted by the backoff
    assert lines[-1].startswith(("前情压缩失败：", "前情摘要拒绝提交：")) and LONE not in lines[-1]


@pytest.mark.parametrize("failure", failures(), ids=IDS)
def test_a_failing_recap_is_a_failed_chat_and_writes_nothing(tmp_path: Path, failure: BaseException | str) -> None:
    two_chats(tmp_path)
    lines: list[str] = []
    good = recap("小满入城", "- 第一天黄昏，小满入城。")
    model = FunctionModel(lambda r: failing(failure, good)(r) if r.purpose == "recap" else merge_reply())
    outcome = memory(tmp_path, model, on_activity=lines.append).sync()
    assert (outcome.recapped, outcome.failed, outcome.merged) == ([], ["A", "B"], "no-change")
    assert not (tmp_path / "记忆" / "局").exists() or not list((tmp_path / "记忆" / "局").iterdir())
    assert any(line.startswith("复盘「初来乍到」失败：") for line in lines)
    assert all(LONE not in line for line in lines)


@pytest.mark.parametrize("failure", failures(), ids=IDS)
def test_a_failing_merge_is_failed_and_writes_nothing(tmp_path: Path, failure: BaseException | str) -> None:
    two_chats(tmp_path)
    memory(tmp_path, FunctionModel(lambda r: RECAP_A if r.purpose == "recap" else merge_reply())).sync()
    write_chat(tmp_path, "A", [("user", "去茶馆吧。"), ("assistant", "好。")])
    before = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("局")}
    lines: list[str] = []
    model = FunctionModel(lambda r: RECAP_A2 if r.purpose == "recap" else failing(failure, merge_reply())(r))
    outcome = memory(tmp_path, model, on_activity=lines.append).sync()
    assert (outcome.recapped, outcome.merged) == (["A"], "failed")
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("局")}
    manifest = ".清单.json"
    assert {k: v for k, v in after.items() if k != manifest} == {k: v for k, v in before.items() if k != manifest}
    assert any(line.startswith("合并记忆失败：") for line in lines)


@pytest.mark.parametrize("failure", failures(), ids=IDS)
def test_discussion_compaction_turns_any_model_failure_into_a_failed_outcome(failure: BaseException | str) -> None:
    tree = tree_with(turns(1, 4))
    size = len(tree)
    lines: list[str] = []
    model = FunctionModel(failing(failure, "- 用户要求每章一万字。\n- 已写完 001.md。"))
    outcome = run_discussion_compaction(tree, model, context_window=50_000, keep_recent=15_000,
                                        on_activity=lines.append)
    assert outcome.kind == "failed" and outcome.entry is None
    assert len(tree) == size
    assert lines[-1].startswith("讨论压缩失败：") and LONE not in lines[-1]


def test_side_call_catches_what_complete_raises_and_only_that() -> None:
    from liyuan.model import side_call

    with pytest.raises(ModelError, match="TimeoutError"):
        side_call(FunctionModel(lambda _r: (_ for _ in ()).throw(TimeoutError("慢"))), _request())
    with pytest.raises(ModelOutputError, match="代理项"):
        side_call(FunctionModel(lambda _r: Completion(text=f"好{LONE}")), _request())
    # Not an Exception: an interrupt still stops the program.
    with pytest.raises(KeyboardInterrupt):
        side_call(FunctionModel(lambda _r: (_ for _ in ()).throw(KeyboardInterrupt())), _request())


def test_a_programming_error_outside_the_model_still_surfaces() -> None:
    # Our own code around the call is not wrapped: a wrong argument is a TypeError.
    tree = tree_of(story_turns(1, 40))
    with pytest.raises(TypeError):
        run_compaction(tree, FunctionModel(lambda _r: SUMMARY_REPLY),
                       CompactionSettings(user_name="旅人", char_name="阿箬", every_n_turns="30"))  # type: ignore[arg-type]


def _request() -> ModelRequest:
    from liyuan.model import request
    return request("summary", "系统", "用户")
