"""The scorecard's text checks: each one passes a good case and fails a broken one."""

from __future__ import annotations

from harness.eval.checks import (
    Fact,
    check_abstention,
    check_latest_scene,
    check_merge_reply,
    check_recap_structure,
    check_resident,
    check_summary_structure,
    fact_in,
    fact_recall,
    parse_match,
    sections,
)
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_HEADING, RESIDENT_MARK, parse_merge_result


def fact(fid: str, *match: str, turn: int | None = 1, section: str | None = None, chat: str = "jA",
         also: tuple[str, ...] = ()) -> Fact:
    return Fact(fid, fid, parse_match(match), chat=chat, turn=turn, section=section, also=also)


SUMMARY = """## 前情提要
- 第一天傍晚，阿简的船在北湾熄火，划小艇到雾港灯塔借宿。
- 林溯收留了阿简，撕掉了航标日志的一页。

## 人物
- 林溯：守灯人，嘴上冷淡，称阿简为“测绘的”。

## 承诺与伏笔
- 阿简答应修好电台；林溯答应修好后教阿简点灯。
- 七号浮标去年秋天熄了。

## 事实账
- 灯油只剩两桶；补给船海鹞号后天上午到。
- 阿简手里有工具间的铜钥匙。

## 当前场景
第一天夜里十点，灯塔一楼厨房，林溯催阿简上楼睡觉。
"""

FACTS = [
    fact("oil", "灯油", "两桶|2桶", section="事实账"),
    fact("ship", "海鹞号", section="事实账"),
    fact("key", "铜钥匙", section="事实账", turn=2),
    fact("radio", "修|修好", "电台", section="承诺与伏笔", turn=2),
    fact("buoy", "七号浮标", section="承诺与伏笔", turn=2),
    fact("nickname", "测绘的", section="人物"),
]


def test_parse_match_and_fact_in_normalize_width_and_spacing() -> None:
    assert parse_match(["灯油", "两桶| 2桶 ", ""]) == (("灯油",), ("两桶", "2桶"))
    oil = fact("oil", "灯油", "两桶|2桶")
    assert fact_in(oil, "灯\n油还剩 ２桶")  # full-width digit and a line break
    assert not fact_in(oil, "灯油还剩三桶")
    assert not fact_in(Fact("empty", "", ()), "anything")


def test_sections_splits_on_level_two_headings_only() -> None:
    body = sections(SUMMARY)
    assert list(body) == ["前情提要", "人物", "承诺与伏笔", "事实账", "当前场景"]
    assert body["当前场景"].startswith("第一天夜里十点")
    assert sections("# 标题\n### 小标题\n正文") == {}


def test_summary_structure_accepts_the_five_sections() -> None:
    result = check_summary_structure(SUMMARY)
    assert result.ok and result.problems == ()
    assert result.chars == len(SUMMARY.strip())


def test_summary_structure_fails_on_missing_swapped_repeated_or_empty() -> None:
    missing = SUMMARY.replace("## 承诺与伏笔", "## 伏笔")
    assert "缺少小节「## 承诺与伏笔」" in check_summary_structure(missing).problems
    a, b = SUMMARY.index("## 人物"), SUMMARY.index("## 承诺与伏笔")
    swapped = SUMMARY[:a] + SUMMARY[b:SUMMARY.index("## 事实账")] + SUMMARY[a:b] + SUMMARY[SUMMARY.index("## 事实账"):]
    assert check_summary_structure(swapped).problems == ("小节顺序不对",)
    repeated = SUMMARY + "\n## 人物\n又一遍"
    assert not check_summary_structure(repeated).ok
    empty_section = SUMMARY.replace("- 林溯：守灯人，嘴上冷淡，称阿简为“测绘的”。", "")
    assert check_summary_structure(empty_section).problems == ("小节「## 人物」没有内容",)
    assert check_summary_structure("  ").problems == ("摘要为空",)


def test_recap_structure_needs_a_title_line_and_five_sections() -> None:
    recap = "# 阿简在灯塔借宿的一夜\n\n" + "\n\n".join(
        f"{h}\n- 内容" for h in ("## 剧情脉络", "## 人物与关系", "## 既定事实", "## 未了之事", "## 用户的玩法偏好"))
    assert check_recap_structure(recap).ok
    no_title = recap.split("\n", 2)[2]
    assert "第一行应该是「# 一句话概括这一局」" in check_recap_structure(no_title).problems
    assert not check_recap_structure(recap.replace("## 既定事实", "## 事实")).ok


def _resident(extra: str = "") -> str:
    return (f"{RESIDENT_HEADING}\n\n## 人物与关系现状\n- 林溯：守灯人\n\n## 既定事实\n- 海鹞号三天一趟\n\n"
            f"## 未了之事\n- 修电台\n\n## 阿简的玩法偏好\n- 慢节奏{extra}\n\n雾夜借宿：阿简在灯塔借住一夜。")


def test_resident_checks_heading_sections_and_the_1200_cap() -> None:
    assert check_resident(_resident(), "阿简").ok
    too_long = check_resident(_resident("。" * 1200), "阿简")
    assert not too_long.ok and any("超过上限 1200" in p for p in too_long.problems)
    assert not check_resident(_resident().replace(RESIDENT_HEADING, "# 往局"), "阿简").ok
    assert not check_resident(_resident(), "别人").ok  # the preferences section names the user


def test_merge_reply_needs_both_parts_and_a_block_per_chat() -> None:
    handbook = "# 局：雾夜借宿（jA）\n- 林溯撕了日志\n来源：局/jA.md\n\n# 人物（跨局）\n- 林溯 [局:jA]"
    good = f"{HANDBOOK_MARK}\n{handbook}\n{RESIDENT_MARK}\n{_resident()}"
    assert check_merge_reply(good, ["jA"]).ok
    assert "手册里没有局 jB 的块" in check_merge_reply(good, ["jA", "jB"]).problems
    swapped = f"{RESIDENT_MARK}\n{_resident()}\n{HANDBOOK_MARK}\n{handbook}"
    assert not check_merge_reply(swapped, ["jA"]).ok
    assert not check_merge_reply(f"{HANDBOOK_MARK}\n{handbook}\n{RESIDENT_MARK}\n", ["jA"]).ok
    assert not check_merge_reply(handbook, ["jA"]).ok


def test_merge_reply_that_copies_a_prompt_tag_fails_as_the_library_refuses_it() -> None:
    handbook = "# 局：雾夜借宿（jA）\n- 林溯撕了日志\n来源：局/jA.md"
    echo = f'{HANDBOOK_MARK}\n{handbook}\n<recap chat="jA">\n抄回来的复盘\n</recap>\n{RESIDENT_MARK}\n{_resident()}'
    assert parse_merge_result(echo) is None
    result = check_merge_reply(echo, ["jA"])
    assert not result.ok
    assert any("<recap>" in p and "照抄" in p for p in result.problems), result.problems
    # Without the copied tag the same reply passes: the tag alone decides.
    assert check_merge_reply(echo.replace('<recap chat="jA">', "").replace("</recap>", ""), ["jA"]).ok


def test_fact_recall_is_complete_and_per_section() -> None:
    result = fact_recall(FACTS, SUMMARY, by_section=True)
    assert result.recall == 1.0 and result.missing == ()
    assert result.per_section["事实账"] == (3, 3)
    assert result.per_section["承诺与伏笔"] == (2, 2)


def test_dropping_a_gold_fact_makes_recall_fall() -> None:
    dropped = SUMMARY.replace("- 七号浮标去年秋天熄了。\n", "")
    result = fact_recall(FACTS, dropped, by_section=True)
    assert result.missing == ("buoy",)
    assert result.recall is not None and result.recall < 1.0
    assert result.per_section["承诺与伏笔"] == (1, 2)


def test_a_fact_in_the_wrong_section_counts_as_found_but_misplaced() -> None:
    moved = SUMMARY.replace("- 灯油只剩两桶；补给船海鹞号后天上午到。\n", "").replace(
        "## 当前场景\n", "## 当前场景\n灯油只剩两桶，补给船海鹞号后天上午到。\n")
    result = fact_recall(FACTS, moved, by_section=True)
    assert result.recall == 1.0
    assert set(result.misplaced) == {"oil", "ship"}
    assert result.per_section["事实账"] == (1, 3)


def test_recall_with_nothing_expected_is_none() -> None:
    assert fact_recall([], SUMMARY).recall is None


SCENES = [
    fact("door", "傍晚|底层|门口", turn=0),
    fact("kitchen", "厨房", turn=1),
    fact("lamp-room", "灯室", turn=3),
]


def test_latest_scene_follows_what_the_summary_covers() -> None:
    current = sections(SUMMARY)["当前场景"]
    result = check_latest_scene(current, SCENES, covered_turn=2)
    assert result.ok and result.verdict == "latest" and result.expected == "kitchen"


def test_an_earlier_scene_in_the_current_scene_section_fails() -> None:
    result = check_latest_scene("第一天傍晚，灯塔底层门口，林溯提着马灯开门。", SCENES, covered_turn=2)
    assert not result.ok and result.verdict == "earlier" and result.named == ("door",)
    later = check_latest_scene("厨房里。", SCENES, covered_turn=3)
    assert not later.ok and later.expected == "lamp-room"
    nothing = check_latest_scene("某个地方。", SCENES, covered_turn=2)
    assert nothing.verdict == "none" and not nothing.ok


def test_mentioning_the_move_from_an_earlier_scene_is_fine() -> None:
    assert check_latest_scene("两人从厨房上到灯室，手摇转盘。", SCENES, covered_turn=3).ok


def test_abstention_flags_never_said_facts_per_artifact() -> None:
    never = [Fact("daughter", "林溯有个女儿", parse_match(["女儿"])),
             Fact("police", "阿简是警察", parse_match(["警察"]))]
    assert check_abstention(never, {"summary": SUMMARY}).ok
    bad = check_abstention(never, {"summary": SUMMARY, "recap": "林溯的女儿在镇上。"})
    assert not bad.ok and bad.violations == (("daughter", "recap"),)
