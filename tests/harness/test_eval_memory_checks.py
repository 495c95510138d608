"""Forgetting, budget and growth checks, including the cases that must fail."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.eval.checks import Fact, parse_match
from harness.eval.memory_checks import check_budget, check_forgetting, check_growth, source_tags
from liyuan.context.budget import OMITTED_MARKER, fit_resident_summary, other_chars_for


def fact(fid: str, chat: str, *match: str, also: tuple[str, ...] = ()) -> Fact:
    return Fact(fid, fid, parse_match(match), chat=chat, also=also)


FACTS = [
    fact("lamp-rule", "jA", "灯室", "陪", also=("jB",)),
    fact("ship", "jA", "海鹞号", also=("jB",)),
    fact("nickname", "jA", "测绘的"),
    fact("cat", "jB", "墨斗"),
    fact("plums", "jB", "青梅"),
    fact("candy", "jB", "桂花糖"),
]

BEFORE = """# 局：雾夜借宿（jA）
- 林溯称阿简为“测绘的”。
来源：局/jA.md

# 局：修灯的那几天（jB）
- 黑猫墨斗叼走了铜螺丝；林汐托人捎来腌青梅。
- 阿简答应给林汐带桂花糖。
来源：局/jB.md

# 世界既定事实（跨局）
- 灯室只有林溯陪着才能上去 [局:jA][局:jB]
- 补给船海鹞号三天来一趟 [局:jA][局:jB]
"""

AFTER = """# 局：雾夜借宿（jA）
- 林溯称阿简为“测绘的”。
来源：局/jA.md

# 世界既定事实（跨局）
- 灯室只有林溯陪着才能上去 [局:jA]
- 补给船海鹞号三天来一趟 [局:jA]
"""


def test_source_tags_reads_half_and_full_width_colons() -> None:
    assert source_tags("- 某事 [局:jA][局：jB]") == {"jA", "jB"}
    assert source_tags("没有标记") == set()


def test_forgetting_by_source_passes_when_exactly_the_deleted_chats_items_go() -> None:
    result = check_forgetting(BEFORE, AFTER, FACTS, {"jB"})
    assert result.ok
    assert set(result.should_go) == {"cat", "plums", "candy"}
    assert result.precision == 1.0 and result.recall == 1.0
    assert set(result.stayed) == {"lamp-rule", "ship", "nickname"}


def test_keeping_a_deleted_chats_item_makes_forgetting_recall_fall() -> None:
    kept = AFTER + "\n# 局：修灯的那几天（jB）\n- 阿简答应给林汐带桂花糖。\n"
    result = check_forgetting(BEFORE, kept, FACTS, {"jB"})
    assert not result.ok
    assert result.recall is not None and result.recall < 1.0
    assert result.to_json()["wrongly_kept"] == ["candy"]


def test_removing_an_item_another_chat_supports_makes_precision_fall() -> None:
    overeager = AFTER.replace("- 补给船海鹞号三天来一趟 [局:jA]\n", "")
    result = check_forgetting(BEFORE, overeager, FACTS, {"jB"})
    assert not result.ok
    assert result.precision is not None and result.precision < 1.0
    assert result.to_json()["wrongly_removed"] == ["ship"]


def test_a_kept_item_still_tagged_with_the_deleted_chat_fails() -> None:
    stale = AFTER.replace("三天来一趟 [局:jA]", "三天来一趟 [局:jA][局:jB]")
    result = check_forgetting(BEFORE, stale, FACTS, {"jB"})
    assert not result.ok and result.stale_tags == ("ship",)
    assert result.recall == 1.0  # the jB-only items did go


def test_nothing_deleted_nothing_due() -> None:
    result = check_forgetting(BEFORE, BEFORE, FACTS, set())
    assert result.ok and result.recall is None and result.precision is None


RESIDENT = "# 往局记忆（同一世界更早的几局）\n\n" + "\n\n".join(f"第{i}段。" + "内容" * 60 for i in range(1, 12))


def test_budget_whole_resident_when_it_fits() -> None:
    short = "# 往局记忆\n\n一段。"
    result = check_budget("摘要" * 100, "时间：夜里", "人物：林溯", short, short)
    assert result.ok and result.cut == "none"


def test_budget_with_no_resident_summary_judges_no_cut() -> None:
    # Nothing to cut: the cut is "absent", never "sent whole", though the envelope still counts.
    result = check_budget("摘要" * 100, "时间：夜里", "人物：林溯", None, None)
    assert result.ok and result.cut == "absent"
    assert check_budget(None, "时间", "", "   ", None).cut == "absent"


def test_budget_accepts_what_fit_resident_summary_does_and_the_seed_numbers() -> None:
    for ledger in (3900, 4200, 3000):
        state = "账" * ledger
        sent = fit_resident_summary(RESIDENT, other_chars_for(None, state, ""))
        result = check_budget(None, state, "", RESIDENT, sent)
        assert result.ok, result.problems
        assert result.cut == {3900: "paragraph", 4200: "dropped", 3000: "paragraph"}[ledger]


def test_budget_fails_a_mid_paragraph_cut() -> None:
    state = "账" * 3900
    sent = RESIDENT[:380] + OMITTED_MARKER  # inside a paragraph although breaks exist
    result = check_budget(None, state, "", RESIDENT, sent)
    assert not result.ok and result.cut == "mid-paragraph"


def test_budget_fails_when_over_the_envelope_or_dropped_without_cause() -> None:
    over = check_budget("摘" * 3000, "账" * 1200, "名" * 200, RESIDENT, None)
    assert not over.ok and any("超过 4300" in p for p in over.problems)
    dropped = check_budget(None, "账" * 100, "", RESIDENT, None)
    assert not dropped.ok and dropped.cut == "dropped"
    sent_anyway = check_budget(None, "账" * 4200, "", RESIDENT, RESIDENT[:90] + OMITTED_MARKER)
    assert not sent_anyway.ok
    invented = check_budget(None, "账", "", None, "凭空多出来的常驻摘要")
    assert not invented.ok


def test_budget_allows_a_line_or_hard_cut_only_when_the_rule_says_so() -> None:
    one_paragraph = "# 往局记忆\n" + "\n".join("一行" * 30 for _ in range(40))
    sent = fit_resident_summary(one_paragraph, 3900)
    assert check_budget(None, "账" * 3900, "", one_paragraph, sent).cut == "line"
    no_breaks = "字" * 2000
    sent = fit_resident_summary(no_breaks, 3900)
    assert check_budget(None, "账" * 3900, "", no_breaks, sent).cut == "hard"
    bad_line_cut = one_paragraph[:300] + OMITTED_MARKER
    assert check_budget(None, "账" * 3900, "", one_paragraph, bad_line_cut).cut == "mid-paragraph"


paragraphs = st.lists(st.text(alphabet="灯塔雾港林溯阿简。，a1\n", min_size=1, max_size=300), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(paragraphs, st.integers(min_value=0, max_value=4300))
def test_budget_check_agrees_with_fit_resident_summary(parts: list[str], other: int) -> None:
    text = "\n\n".join(parts)
    sent = fit_resident_summary(text, other)
    result = check_budget(None, "账" * other, "", text if text.strip() else None, sent)
    assert result.ok, (result.problems, result.cut)


def test_growth_reports_compression_and_spots_a_snowball() -> None:
    steady = check_growth(["摘" * 500, "摘" * 520, "摘" * 510], [10000, 9000, 9500])
    assert not steady.snowball
    assert steady.covered_chars == (10000, 19000, 28500)
    assert steady.compression[0] == 0.05
    snowball = check_growth(["摘" * 500, "摘" * 800, "摘" * 1200], [10000, 9000, 9500])
    assert snowball.snowball
    assert snowball.max_share_of_envelope == round(1200 / 4300, 4)
