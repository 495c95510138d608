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

from liyuan.card.handbook import BLOCK_MAX_CHARS, SHARED_HEADINGS, SHARED_MAX_CHARS, source_ids, split_handbook
from liyuan.card.inputs import MERGE_BATCH_RECAPS, ChangedRecap, SyncSettings
from liyuan.card.merge_check import MERGE_MAX_REPLY_CHARS
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_HEADING, RESIDENT_MARK, build_merge_prompt
from liyuan.context.budget import RESIDENT_MAX_CHARS
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


def partial_merge(replies: list[int], prompts: list[int] | None = None) -> FunctionModel:
    """Blocks for the recaps sent, the three cross-chat sections, a short resident summary
    (``prompts`` gets the length of each merge prompt's user part)."""

    def answer(request: ModelRequest) -> Completion:
        assert request.purpose == "merge", request.purpose
        if prompts is not None:
            prompts.append(len(user_text(request)))
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
    prompts: list[int] = []
    model = partial_merge(replies, prompts)
    mem = memory(tmp_path, model)
    assert mem.sync().merged == "ok"
    handbook = (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert source_ids(handbook) == set(ids)  # a block for every chat
    blocks = [p.chat_id for p in split_handbook(handbook) if p.kind == "block"]
    assert blocks == ids  # each once, in the order they were merged
    assert handbook.count("# 人物（跨局）") == 1  # the cross-chat sections once, at the end
    assert len(handbook) > MERGE_MAX_REPLY_CHARS  # bigger than any one reply may be ...
    assert max(replies) < 2_000  # ... while each reply stays the size of a batch
    assert max(prompts) < 6_000  # and so does each prompt: it is sent no block of a chat it does not merge
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


def test_a_reply_of_every_block_keeps_the_handbooks_own_text_and_one_without_shared_sections_keeps_them() -> None:
    from liyuan.card.handbook import assemble_handbook

    # every block written (as a whole handbook would be): the text a person wrote stays
    whole = "# 局：甲（A）\n- 一\n来源：局/A.md\n\n# 局：乙（B）\n- 二\n来源：局/B.md"
    kept = assemble_handbook(OLD, whole, gone=())
    assert kept == f"手写的前言：这本手册我自己也会改。\n\n{whole}\n\n# 人物（跨局）\n- 小满 [局:A][局:B]"
    only_a = assemble_handbook(OLD, "# 局：甲（A）\n- 一，改过\n来源：局/A.md", gone=())
    assert only_a.endswith("# 人物（跨局）\n- 小满 [局:A][局:B]") and "- 二" in only_a
    # no handbook yet, or one without any block: the reply is the handbook
    assert assemble_handbook(None, whole, gone=()) == whole
    assert assemble_handbook("用户更正：东门", whole, gone=()) == whole


def test_what_the_code_keeps_of_the_old_handbook_forgets_by_itself() -> None:
    from liyuan.card.handbook import assemble_handbook

    old = ("前言 [局:B]\n- 小满爱喝茶 [局:A][局:B]\n\n# 局：甲（A）\n- 一\n来源：局/A.md\n\n"
           "# 局：乙（B）\n- 二\n来源：局/B.md\n\n# 人物（跨局）\n- 小满 [局:A][局:B]\n- 只在乙局 [局:B]")
    # a merge that only forgets B and writes no cross-chat section: B leaves every kept part
    out = assemble_handbook(old, "", gone={"B"})
    assert "[局:B]" not in out and "来源：局/B.md" not in out and "只在乙局" not in out
    assert "- 小满爱喝茶 [局:A]" in out and out.endswith("# 人物（跨局）\n- 小满 [局:A]")


def _handbook(chats: int) -> str:
    blocks = "\n\n".join(f"# 局：第{n}局（c{n:04d}）\n- 小满在城东住了一晚。\n来源：局/c{n:04d}.md"
                         for n in range(chats))
    shared = "\n\n".join(f"{heading}\n- 城东有茶馆。[局:c0001][局:c0005]" for heading in SHARED_HEADINGS)
    return f"手写的前言。\n\n{blocks}\n\n{shared}"


def _batch_prompt(chats: int) -> tuple[str, str]:
    changed = [ChangedRecap(chat_id, chat_id, "# 复盘\n- 又住了一晚。") for chat_id in ("c0005", "c0010", "c9999")]
    p = build_merge_prompt(SyncSettings("阿明", "小满", "中文"), handbook=_handbook(chats),
                           resident=f"{RESIDENT_HEADING}\n- 小满在城东。", changed=changed, deleted=["c0007"])
    return p.system, p.user


@pytest.mark.parametrize("chats", [20, 1000])
def test_the_merge_prompt_is_sent_and_asks_for_only_the_blocks_of_its_recaps(chats: int) -> None:
    """Issue 37: the merge prompt's contract is partial both ways, at any number of chats."""
    system, user = _batch_prompt(chats)
    # sent: the old blocks of the chats whose recaps it carries, the cross-chat sections, the
    # handbook's own text; not the other chats' blocks, only how many were left out
    assert source_ids(user) == {"c0005", "c0010"}
    assert all(heading in user for heading in SHARED_HEADINGS) and "手写的前言。" in user
    assert re.search(rf"(?<!\d){chats - 3}(?!\d)", user)  # the blocks kept by the code: all but 2 sent, 1 deleted
    assert re.search(r"^- 局/c0007\.md（局：第7局（c0007））$", user, re.M)  # a deleted chat, named by its title
    assert len(user) - len(_batch_prompt(20)[1]) < 10  # the same size at 20 chats and at 1,000
    # asked for: the blocks of exactly the recaps sent, named after the last recap
    tail = user.rsplit("</recap>", 1)[1]
    assert [c for c in ("c0005", "c0010", "c9999", "c0001", "c0007") if c in tail] == ["c0005", "c0010", "c9999"]
    # the reply's shape: both marks, the three cross-chat sections, each part's bound, and
    # a batch of blocks at their bound plus both other parts fits one reply
    assert HANDBOOK_MARK in system and RESIDENT_MARK in system and all(h in system for h in SHARED_HEADINGS)
    assert str(BLOCK_MAX_CHARS) in system and str(SHARED_MAX_CHARS) in system and str(RESIDENT_MAX_CHARS) in system
    assert MERGE_BATCH_RECAPS * BLOCK_MAX_CHARS + SHARED_MAX_CHARS + RESIDENT_MAX_CHARS + 200 < MERGE_MAX_REPLY_CHARS
