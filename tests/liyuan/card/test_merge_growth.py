"""A card with hundreds of chats keeps merging (issue 37, item 4).

The merge reply writes the blocks of the chats whose recaps it was sent and the
cross-chat sections; the code keeps every other block (:mod:`liyuan.card.handbook`), so
the reply stays the same size at 8 chats and at 1,000. Every reply here is hand-written
by the rule below (FunctionModel), not model output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from liyuan.card.handbook import split_handbook
from liyuan.card.merge_check import MERGE_MAX_REPLY_CHARS, source_ids
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_HEADING, RESIDENT_MARK
from liyuan.model import Completion, FunctionModel, ModelRequest

from .test_fixtures import memory, recap, user_text

_RECAP = re.compile(r'<recap chat-id="([^"]+)" chat-name="([^"]*)">')


def write_recaps(card: Path, first: int, count: int) -> list[str]:
    """Recaps written by hand (no chat behind them), one per chat id."""
    folder = card / "记忆" / "局"
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"c{n:04d}" for n in range(first, first + count)]
    for chat_id in ids:
        (folder / f"{chat_id}.md").write_text(recap(f"第{chat_id}局", f"- {chat_id}：小满在城东又住了一晚。") + "\n",
                                              encoding="utf-8")
    return ids


def partial_merge(replies: list[int]) -> FunctionModel:
    """Blocks for the recaps sent, the three cross-chat sections, a short resident summary."""

    def answer(request: ModelRequest) -> Completion:
        assert request.purpose == "merge", request.purpose
        sent = _RECAP.findall(user_text(request))
        blocks = "\n\n".join(f"# 局：{name}（{chat_id}）\n- 小满在城东又住了一晚，第二天一早去茶馆帮工。\n"
                             f"- 和阿明约好下次在北门见，伞还在他那里。\n来源：局/{chat_id}.md"
                             for chat_id, name in sent)
        tags = "".join(f"[局:{chat_id}]" for chat_id, _ in sent[:3])
        shared = (f"# 人物（跨局）\n- 小满：城东茶馆的帮工。{tags}\n\n# 世界既定事实（跨局）\n- 城东有茶馆。{tags}\n\n"
                  f"# 用户的玩法偏好（跨局）\n- 慢节奏的日常。{tags}")
        resident = f"{RESIDENT_HEADING}\n\n## 人物与关系现状\n- 小满在城东茶馆帮工。"
        text = f"{HANDBOOK_MARK}\n{blocks}\n\n{shared}\n{RESIDENT_MARK}\n{resident}\n"
        replies.append(len(text))
        return Completion(text, provenance="scripted")

    return FunctionModel(answer)


@pytest.mark.slow
@pytest.mark.parametrize("chats", [500, 1000])
def test_every_recap_of_a_card_with_hundreds_of_chats_is_merged_and_a_quiet_sync_costs_nothing(
        tmp_path: Path, chats: int) -> None:
    ids = write_recaps(tmp_path, 0, chats)
    replies: list[int] = []
    model = partial_merge(replies)
    mem = memory(tmp_path, model)
    assert mem.sync().merged == "ok"
    handbook = (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert source_ids(handbook) == set(ids)  # a block for every chat
    blocks = [p.chat_id for p in split_handbook(handbook) if p.kind == "block"]
    assert blocks == ids  # each once, in the order they were merged
    assert handbook.count("# 人物（跨局）") == 1  # the cross-chat sections once, at the end
    assert len(handbook) > MERGE_MAX_REPLY_CHARS  # bigger than any one reply may be ...
    assert max(replies) < 2_000  # ... while each reply stays the size of a batch
    calls = len(model.calls)
    assert mem.sync().merged == "no-change"
    assert len(model.calls) == calls  # nothing changed: 0 side-model calls
    # one more chat later: one merge, the other blocks kept as they were
    write_recaps(tmp_path, chats, 1)
    assert mem.sync().merged == "ok" and len(model.calls) == calls + 1
    after = (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert len(source_ids(after)) == chats + 1
    assert after.startswith(handbook.split("# 人物（跨局）")[0].rstrip())


OLD = ("手写的前言：这本手册我自己也会改。\n\n# 局：甲（A）\n- 一\n来源：局/A.md\n\n"
       "# 局：乙（B）\n- 二\n来源：局/B.md\n\n# 人物（跨局）\n- 小满 [局:A][局:B]")


def test_assembly_keeps_the_text_and_blocks_it_was_not_given_and_drops_the_forgotten() -> None:
    from liyuan.card.handbook import assemble_handbook

    reply = ("# 局：乙（B）\n- 二，改过\n来源：局/B.md\n\n# 局：丙（C）\n- 三\n来源：局/C.md\n\n"
             "# 人物（跨局）\n- 小满 [局:B][局:C]")
    assembled = assemble_handbook(OLD, reply, gone=())
    assert [(p.kind, p.chat_id) for p in split_handbook(assembled)] == [
        ("text", ""), ("block", "A"), ("block", "B"), ("block", "C"), ("shared", "")]
    assert "二，改过" in assembled and "- 一" in assembled and "[局:A][局:B]" not in assembled
    forgot = assemble_handbook(OLD, "# 局：丙（C）\n- 三\n来源：局/C.md\n\n# 人物（跨局）\n- 小满 [局:B][局:C]",
                               gone={"A"})
    assert [(p.kind, p.chat_id) for p in split_handbook(forgot)] == [
        ("text", ""), ("block", "B"), ("block", "C"), ("shared", "")]
    assert forgot.startswith("手写的前言") and "来源：局/A.md" not in forgot


def test_a_whole_handbook_reply_is_taken_as_it_is_and_a_reply_without_shared_sections_keeps_them() -> None:
    from liyuan.card.handbook import assemble_handbook

    whole = "# 局：甲（A）\n- 一\n来源：局/A.md\n\n# 局：乙（B）\n- 二\n来源：局/B.md"
    assert assemble_handbook(OLD, whole, gone=()) == whole
    only_a = assemble_handbook(OLD, "# 局：甲（A）\n- 一，改过\n来源：局/A.md", gone=())
    assert only_a.endswith("# 人物（跨局）\n- 小满 [局:A][局:B]") and "- 二" in only_a
