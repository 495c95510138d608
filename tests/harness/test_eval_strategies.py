"""The synthetic long chat, the strategy comparison and its chart."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from itertools import pairwise

import pytest

from harness.eval.chart import render_chart
from harness.eval.checks import fact_in
from harness.eval.strategies import SCRIPTED_LABEL, Settings, compare, scripted_summariser
from harness.fixtures.synth import PLANTED, generate_chat
from liyuan.model import ChatMessage, ModelRequest
from liyuan.story.scribe import validate_summary

SMALL = Settings(turns=130, reroll_turn=66, window_tokens=12000, truncate_turns=10,
                 agent_reserve_tokens=4000, agent_keep_recent_tokens=2500)


@pytest.fixture(scope="module")
def small_report() -> dict:
    return compare(SMALL)


def by_name(report: dict) -> dict[str, dict]:
    return {s["name"]: s for s in report["strategies"]}


def test_default_chat_is_long_deterministic_and_has_scene_changes() -> None:
    chat = generate_chat()
    assert len(chat.turns) >= 500
    assert chat == generate_chat()
    assert generate_chat(seed=8).turns[0] != chat.turns[0]
    assert len(chat.scenes) >= 5 and chat.scenes[0].turn == 0
    assert sum(len(b.user) + len(b.reply) for b in chat.turns) > 150_000


def test_each_planted_fact_is_said_once_on_its_turn() -> None:
    chat = generate_chat()
    for fact in chat.facts:
        turns_saying_it = [b.number for b in chat.turns if fact_in(fact, b.user + b.reply)]
        assert turns_saying_it == [fact.turn], fact.id
    assert len(chat.facts) == len(PLANTED)


def test_the_reroll_swipes_a_reply_only_it_says() -> None:
    chat = generate_chat()
    rerolled = [b for b in chat.turns if b.swiped_reply is not None]
    assert [b.number for b in rerolled] == [chat.reroll_turn]
    assert fact_in(chat.swiped, rerolled[0].swiped_reply or "")
    assert not any(fact_in(chat.swiped, b.reply + b.user) for b in chat.turns)


def test_generate_chat_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        generate_chat(turns=10)
    with pytest.raises(ValueError):
        generate_chat(turns=100, reroll_turn=200)


def test_scripted_summaries_are_labelled_and_pass_the_real_validator() -> None:
    model = scripted_summariser("沈砚", "苏蘅")
    user = ("<conversation>\n沈砚：你好\n\n苏蘅：住店？\n</conversation>\n\n"
            "【工具账本快照】（…）\n时间：第1天清晨\n地点：客栈")
    request = ModelRequest((ChatMessage("system", "s"), ChatMessage("user", user)), purpose="summary")
    completion = model.complete(request)
    assert completion.provenance == "scripted"
    assert SCRIPTED_LABEL in completion.text
    assert "时间：第1天清晨；地点：客栈" in validate_summary(completion.text)


def test_full_replay_only_grows_and_truncation_stays_bounded(small_report: dict) -> None:
    runs = by_name(small_report)
    full = runs["full"]["series"]["chars"]
    assert all(b >= a for a, b in pairwise(full))
    assert runs["full"]["side_calls"] == 0 and runs["full"]["cut_turns"] == []
    truncated = runs["truncate"]["series"]["chars"]
    assert max(truncated) < full[-1] / 5
    assert runs["truncate"]["cuts_inside_turn"] == 0


def test_ours_cuts_between_turns_and_keeps_the_budget(small_report: dict) -> None:
    ours = by_name(small_report)["ours"]
    assert ours["compactions"] >= 3
    assert ours["cuts_inside_turn"] == 0
    assert ours["budget_failures"] == 0
    assert ours["side_calls"] == sum(ours["series"]["calls"]) == ours["compactions"]
    # Compaction fires once 36 turns are uncovered, then every 30; turn 66 is swiped after its
    # compaction, and the new branch's compaction waits until the swipe settled (two turns, issue 38).
    assert [c["turn"] for c in ours["cut_turns"]][:3] == [36, 66, 68]
    assert ours["max_chars"] < by_name(small_report)["full"]["max_chars"]


def test_the_generic_agent_triggers_on_its_own_ruler_and_may_cut_inside_a_turn(small_report: dict) -> None:
    agent = by_name(small_report)["agent"]
    assert agent["compactions"] >= 1
    assert agent["cuts_inside_turn"] + agent["cuts_between_turns"] == agent["compactions"]
    # chars/4 undercounts Chinese: by the time it fires, the real estimate is past the window.
    first = agent["cut_turns"][0]["turn"]
    assert agent["series"]["tokens"][first - 1] > SMALL.window_tokens


def test_fact_fates_and_the_swiped_reply(small_report: dict) -> None:
    runs = by_name(small_report)
    planted = sum(1 for p in PLANTED if p.turn <= SMALL.turns)
    for run in runs.values():
        assert sum(run["facts"].values()) == planted
        assert run["swiped_fact_in_final_context"] is False
    assert runs["full"]["facts"]["verbatim"] == planted
    assert runs["truncate"]["facts"]["lost"] == planted
    assert runs["ours"]["facts"]["lost"] == 0


def test_comparison_is_deterministic_and_json_stable(small_report: dict) -> None:
    again = compare(SMALL)
    assert json.dumps(again, sort_keys=True) == json.dumps(small_report, sort_keys=True)
    assert small_report["provenance"] == "scripted"


def test_chart_is_valid_svg_with_one_line_per_strategy_and_stable_bytes(small_report: dict) -> None:
    svg = render_chart(small_report)
    assert svg == render_chart(json.loads(json.dumps(small_report)))
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert root.find("s:title", ns) is not None and root.find("s:desc", ns) is not None
    assert len(root.findall(".//s:polyline", ns)) == 2 * 4  # two panels
    assert "不是模型输出" in svg


def test_ours_counts_a_context_whose_ledger_breaks_the_envelope() -> None:
    from harness.eval.strategies import Ours
    from harness.fixtures.synth import SynthTurn

    strategy = Ours("开场白", scripted_summariser("沈砚", "苏蘅"), "沈砚", "苏蘅")
    try:
        huge = {"items": [f"第{i}件很长很长的物品描述" * 3 for i in range(120)]}
        strategy.turn(SynthTurn(1, "你好", "你好。", huge))
        assert strategy.budget_failures == 0  # the first context is sent before any ledger exists
        messages, _ = strategy.turn(SynthTurn(2, "再说一句", "好。", {}))
        assert strategy.budget_failures == 1
        assert messages[-1].content.endswith("再说一句")  # what the chat sent, through Chat.prepare
    finally:
        strategy.close()
