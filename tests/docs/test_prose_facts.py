"""The pages' prose quotes facts from the artifacts; when an artifact changes, these fail.

The 模版 and 效果 blocks are included from the files themselves, so they cannot drift.
The sentences around them can: "「承诺与伏笔」列了八条", "第六轮后 9220". Each test
below pins one such sentence to the artifact it describes, so a scenario or prompt
change that makes the prose false shows up here, next to the sentence to rewrite.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .hook import ROOT

TXT = ROOT / "sim" / "txt"
MEMORY = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
BRANCH = (ROOT / "docs" / "branch.md").read_text(encoding="utf-8")


def txt(name: str) -> str:
    return (TXT / name).read_text(encoding="utf-8")


def body_lines(name: str) -> list[str]:
    """Lines of an artifact after its provenance header line."""
    return txt(name).splitlines()[1:]


def section(text: str, heading: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line.strip()]


def step(scenario: str, step_id: str) -> dict[str, Any]:
    record = json.loads((ROOT / "sim" / "out" / f"{scenario}.json").read_text(encoding="utf-8"))
    return next(s for s in record["steps"] if s["id"] == step_id)


def test_every_scripted_artifact_says_so_in_its_first_line() -> None:
    scripted = ["summary.txt", "recap-A.txt", "handbook-1.txt", "resident-1.txt", "handbook-2.txt",
                "resident-2.txt", "long-summary-2.txt", "discussion-summary.txt"]
    for name in scripted:
        assert "不是模型输出" in txt(name).splitlines()[0], name
    assert "人工撰写" in txt("recap-B.txt").splitlines()[0]


def test_compact_section_sentences() -> None:
    # "这三轮一共 694 字 …… 这份摘要（1250 字）…… 压缩比 1.80 …… 长局 0.61 和 0.45"
    scores = json.loads((ROOT / "sim" / "out" / "eval.json").read_text(encoding="utf-8"))["scenarios"]
    walk, long = scores["walkthrough"]["growth"]["jA"], scores["longchat"]["growth"]["jL"]
    assert walk["covered_chars"] == [694] and "这三轮一共 694 字" in MEMORY
    assert walk["summary_chars"] == [1250] and "这份摘要（1250 字）" in MEMORY
    assert f"{walk['compression'][0]:.2f}" == "1.80" and "压缩比 1.80" in MEMORY
    assert [f"{c:.2f}" for c in long["compression"]] == ["0.61", "0.45"] and "0.61 和 0.45" in MEMORY
    assert len(section(txt("summary.txt"), "## 承诺与伏笔")) == 8


def test_replay_section_sentences() -> None:
    assert "组装出四条消息" in MEMORY
    history = txt("summary-history.txt")
    headers = re.findall(r"^===== \d+ · (\w+) =====$", history, re.MULTILINE)
    assert headers == ["user", "user", "assistant", "user"]
    last = history.split("===== 4 · user =====")[1]
    assert last.index("【世界状态】") < last.index("【登场名录】")


def test_vector_section_sentences() -> None:
    assert "第 21 轮" in txt("long-play-1.txt") and "第 36 轮" in txt("long-play-2.txt")
    injection = txt("long-injection.txt")
    assert injection.index("【登场名录】") < injection.index("【剧情记忆】")
    first_hit = injection.split("【剧情记忆】\n", 1)[1].split("\n- ", 1)[0]
    assert "早期剧情归档" in first_hit and "铜纽扣" in first_hit and "第三天" in first_hit
    assert "铜纽扣" in txt("long-context.txt").rstrip().splitlines()[-1]  # the user's words close the context


def test_merge_and_forget_sentences() -> None:
    before, after = body_lines("resident-1.txt"), body_lines("resident-2.txt")
    assert set(after) <= set(before), "删 jB 后的常驻摘要只能删行，jA 的条目一字不动"
    removed = "\n".join(line for line in before if line not in after)
    for thing in ("林汐", "墨斗", "青鸥号", "桂花糖", "慢一点"):
        assert thing in removed and thing in MEMORY, thing
    assert "（jB）" in removed and "jB 那行简介" in MEMORY
    assert "[局:jA][局:jB]" in txt("handbook-1.txt")
    assert "[局:jB]" not in txt("handbook-2.txt")
    assert "【前情提要】" in txt("new-chat-history.txt") and "# 往局记忆" in txt("new-chat-history.txt")


def test_budget_sentences() -> None:
    fit = txt("fit.txt")
    assert "= 400 字" in fit and "（……余下内容因篇幅略）" in fit
    assert "= 100 字" in fit and "返回 None" in fit


def test_discussion_sentences() -> None:
    check5, check6 = step("discussion", "check-5")["outcome"], step("discussion", "check-6")["outcome"]
    assert (check5["kind"], check5["last_request_usage_tokens"], check5["threshold"]) == ("skipped", 7750, 8000)
    assert (check6["kind"], check6["last_request_usage_tokens"], check6["turns"]) == ("compacted", 9220, 3)
    assert (check6["context_window"], check6["reserve"], check6["keep_recent"]) == (12000, 4000, 500)
    assert (check6["estimate_tokens_chars4"], check6["estimate_tokens_cjk"]) == (311, 1030)
    for number in ("7750", "9220", "311", "1030", "12000", "4000", "500"):
        assert number in MEMORY, number
    strategies = json.loads((ROOT / "sim" / "eval" / "strategies.json").read_text(encoding="utf-8"))
    agent = next(r for r in strategies["strategies"] if r["name"] == "agent")
    assert agent["turns_over_window"] == 472 and "472 轮超窗" in MEMORY


def test_branch_page_sentences() -> None:
    reroll = step("longchat", "reroll-24")
    assert "第 24 轮" in BRANCH and reroll["params"]["chat"] == "jL"
    assert "怀表" in reroll["note"] and "怀表" in BRANCH
    # The first summary hangs after turn 21, before the rerolled turn 24.
    assert step("longchat", "play-1")["outcome"]["compactions"][0]["after_turn"] == 21
    second = step("longchat", "play-2")["outcome"]["compactions"][0]
    assert second["after_turn"] == 36 and second["merged_previous_summary"] is True
    prompt = txt("long-summary-2-prompt.txt")
    assert "<previous-summary>" in prompt and "灰擦干净" in prompt and "怀表" not in prompt
    recall = step("longchat", "recall-abandoned")
    assert recall["params"]["query"] == "她父亲留下的那块旧怀表" and "她父亲留下的那块旧怀表" in BRANCH
    assert "怀表" not in txt("long-recall-abandoned.txt")
    assert recall["outcome"]["chunks_off_branch"], "the abandoned reply's chunk must exist, just off the branch"


def test_every_sim_file_the_pages_mention_exists() -> None:
    for page in (MEMORY, BRANCH):
        for rel in re.findall(r"`(sim/[^`<>]+\.(?:yaml|json|txt))`", page):
            assert (ROOT / rel).is_file(), rel
    assert Path(ROOT / "sim" / "scenarios" / "longchat.yaml").is_file()


def test_long_chat_sentences() -> None:
    """memory.md #vector, branch.md #vector and harness.md describe the longchat run."""
    harness_page = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")
    first = step("longchat", "play-1")["outcome"]["compactions"]
    second = step("longchat", "play-2")["outcome"]["compactions"]
    assert [c["after_turn"] for c in first + second] == [21, 36]
    assert "第 21 轮后第一次自动压缩，第 36 轮后第二次" in harness_page
    assert first[0]["turns"] == 15 and "第一次压缩的锚点在第 15 轮" in BRANCH
    assert second[0]["merged_previous_summary"] is True and "第二次把第一份摘要整份并进来" in harness_page
    assert "第 24 轮重来一次" in harness_page and step("longchat", "reroll-24")["kind"] == "reroll"
    end = step("longchat", "assemble-end")["outcome"]
    first_kept = end["messages"][1]
    assert first_kept["role"] == "user" and first_kept["opening"].startswith("（第三十一天")
    assert "第 31-40 轮原文" in MEMORY
    recalled = end["recall_lines"][0]
    assert recalled.startswith("- 【早期剧情归档】") and "第 1-3 轮原文" in MEMORY
    assert all(day in recalled for day in ("第一天", "第二天", "第三天", "铜纽扣")) and "第四天" not in recalled


def test_local_run_sentences() -> None:
    """harness.md #local describes the committed plumbing run; pin each number to it."""
    page = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")
    folder = ROOT / "sim" / "runs" / "local-gemma3-270m"
    info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    calls = sum(s["calls"] for s in info["scenarios"].values())
    minutes = round(sum(s["latency_ms"] for s in info["scenarios"].values()) / 60_000)
    assert f"{calls} 次调用，约 {minutes} 分钟" in page
    readme = (folder / "README.md").read_text(encoding="utf-8")
    compact = json.loads((folder / "out" / "compact.json").read_text(encoding="utf-8"))
    [summary_reply] = [c["reply"]["text"] for s in compact["steps"] for c in s["calls"]]
    assert summary_reply.count("## 前情提要") == 16 and "出现了 16 次" in page
    assert "摘要照抄了 prompt 里的要求（如「你是一场长篇角色扮演的场记」）" in readme
    assert "如「你是一场长篇角色扮演的场记」" in page and "照抄检查" in page
    assert "被接受" not in readme.split("## 目录里有什么")[0] and "这一次没有「被接受」" in page
    assert readme.count("局 jA 的复盘失败") == 2 and "两次同步各一次" in page
    assert "<conversation>" in readme and "合并回复格式不对" in readme


SHOWN_TWICE = {"sim/txt/resident-1.txt": "memory.md"}
"""The one artifact shown twice, as the seed shows it (issue 39): the merged resident summary,
open in #merge where it is made, and again as the "before" side of #forget's pair."""


def test_no_artifact_is_shown_twice_on_the_site() -> None:
    """Each sim/ artifact is included once across all pages (but SHOWN_TWICE); a second mention links back."""
    seen: dict[str, list[str]] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        for spec in re.findall(r'--8<-- "(sim/[^"]+)"', page.read_text(encoding="utf-8")):
            seen.setdefault(spec, []).append(page.name)
    twice = {spec: pages for spec, pages in seen.items() if len(pages) > 1}
    assert twice == {spec: [page, page] for spec, page in SHOWN_TWICE.items()}
    merge = MEMORY.split("{ #merge }", 1)[1].split("\n## ", 1)[0]
    forget = MEMORY.split("{ #forget }", 1)[1].split("\n## ", 1)[0]
    assert '--8<-- "sim/txt/resident-1.txt"' in merge and '--8<-- "sim/txt/resident-1.txt"' in forget


def test_the_first_compaction_sentences_state_both_conditions(tmp_path: Path) -> None:
    """Issue 39: "nothing is compacted until 36 turns" also says 2,000 characters, and a chat
    of one-line replies really has no summary at 40 turns (until min_chars is lowered)."""
    from liyuan import Card, MemoryConfig
    from liyuan.testing import placeholder_side_model

    default = MemoryConfig()
    assert (default.keep, default.every_n_turns, default.min_chars) == (6, 30, 2000)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    app = (ROOT / "docs" / "app.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "`min_chars=2000`" in readme and "at least 2,000 characters" in readme and "no summary at 40 turns" in readme
    assert "`min_chars=2000`" in app and "不少于 2000 字" in app and "演到第 40 轮也可能还没有摘要" in app
    assert "攒到 36 轮、要压的正文满 2000 字才压第一次" in index

    def summary_after_40_short_turns(config: MemoryConfig) -> bool:
        folder = tmp_path / f"min-{config.min_chars}"
        with Card.open(folder, side_model=placeholder_side_model(), config=config, background=False) as card:
            chat = card.chat("jA")
            for turn in range(40):
                chat.prepare(f"第 {turn + 1} 轮：嗯。")
                chat.record("（脚本回复，不是模型输出）她点点头。")
            return chat.summary is not None

    assert not summary_after_40_short_turns(MemoryConfig())
    assert summary_after_40_short_turns(MemoryConfig(min_chars=500))


def test_the_pins_section_and_the_swiped_compaction_match_the_artifacts() -> None:
    """memory.md#pins: the late turn is pA's seventh and carries both pins after two compactions
    and a merge; eval.md: the swiped turn's compaction on the new branch waits two turns."""
    plays = [s for s in json.loads((ROOT / "sim" / "out" / "pins.json").read_text(encoding="utf-8"))["steps"]
             if s["kind"] == "play" and s["outcome"]["chat"] == "pA"]
    assert plays[-1]["outcome"]["turns_played"] + 1 == 7 and "pA 第 7 轮" in MEMORY
    assert sum(len(p["outcome"]["compactions"]) for p in plays) == 2 and "压缩两次" in MEMORY
    late = txt("pins-late-history.txt")
    assert "林溯左手的小指缺了一截" in late and "雾港灯塔的雾笛每到整点响三声" in late
    assert all("小指" not in txt(n) for n in ("pins-summary-1.txt", "pins-summary-2.txt", "pins-resident.txt"))
    strategies = json.loads((ROOT / "sim" / "eval" / "strategies.json").read_text(encoding="utf-8"))
    ours = next(s for s in strategies["strategies"] if s["name"] == "ours")
    turns = [c["turn"] for c in ours["cut_turns"]]
    assert ours["compactions"] == 20 and 246 in turns and 248 in turns and 247 not in turns
    page = (ROOT / "docs" / "eval.md").read_text(encoding="utf-8")
    assert "梨园压了 20 次" in page and "第 248 轮才压" in page
