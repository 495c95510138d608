"""The scorecard on real artifacts: it reads the harness's files, and it notices damage."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.eval import main, results
from harness.eval.gold import GoldError, load_gold, parse_gold
from harness.eval.report import FACT_LEGEND, NOT_APPLICABLE, SCORECARD_LEGEND, _fact_table, scorecard_rows
from harness.eval.scorecard import provenance_of, score_run
from liyuan.card.prompts import RESIDENT_MARK

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    """A repository-shaped copy of the walkthrough's scenario and artifacts."""
    (tmp_path / "sim" / "scenarios").mkdir(parents=True)
    shutil.copy(ROOT / "sim" / "scenarios" / "walkthrough.yaml", tmp_path / "sim" / "scenarios")
    (tmp_path / "sim" / "out").mkdir()
    for name in ("compact.json", "memory.json"):
        shutil.copy(ROOT / "sim" / "out" / name, tmp_path / "sim" / "out")
    shutil.copytree(ROOT / "sim" / "txt", tmp_path / "sim" / "txt")
    return tmp_path


def edit_reply(root: Path, out: str, step_id: str, purpose: str, change: Callable[[str], str]) -> None:
    path = root / "sim" / "out" / out
    data = json.loads(path.read_text(encoding="utf-8"))
    step = next(s for s in data["steps"] if s["id"] == step_id)
    call = next(c for c in step["calls"] if c["purpose"] == purpose)
    call["reply"]["text"] = change(call["reply"]["text"])
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def walkthrough(root: Path) -> dict[str, Any]:
    card: dict[str, Any] = score_run(root / "sim", root)["scenarios"]["walkthrough"]
    return card


def test_the_scripted_walkthrough_scores_clean_and_is_labelled(run_copy: Path) -> None:
    full = score_run(run_copy / "sim", run_copy)
    assert full["provenance"]["kind"] == "scripted"
    assert "只检验评分器本身" in full["provenance"]["label"]
    card = full["scenarios"]["walkthrough"]
    summary = card["summaries"][0]
    assert summary["covered_through_turn"] == 2  # greeting and two turns went to the summariser
    assert summary["structure"]["ok"] and summary["recall"]["recall"] == 1.0
    assert summary["latest_scene"] == {"ok": True, "verdict": "latest", "expected": "ja-kitchen",
                                       "named": ["ja-kitchen"]}
    assert [r["chat"] for r in card["recaps"]] == ["jA"]
    assert [m["recaps"] for m in card["merges"]] == [["jA", "jB"], ["jA"]]
    assert all(f["ok"] and f["recall"] == 1.0 for f in card["forgetting"])
    # The first context is assembled before any merge: no resident summary, nothing to cut.
    assert [b["cut"] for b in card["budget"]] == ["absent", "none", "paragraph", "dropped", "none"]  # last: hand-edited
    assert all(b["ok"] for b in card["budget"])
    assert card["abstention"]["ok"]


def test_dropping_a_gold_fact_from_the_summary_makes_recall_fall(run_copy: Path) -> None:
    edit_reply(run_copy, "compact.json", "compact-jA", "summary", lambda text: text.replace("七号浮标", "那个浮标"))
    summary = walkthrough(run_copy)["summaries"][0]
    assert summary["recall"]["missing"] == ["ja-buoy"]
    assert summary["recall"]["recall"] < 1.0
    assert summary["recall"]["per_section"]["承诺与伏笔"]["found"] < summary["recall"]["per_section"]["承诺与伏笔"][
        "expected"]


def test_keeping_a_deleted_chats_item_makes_forgetting_recall_fall(run_copy: Path) -> None:
    def keep_candy(text: str) -> str:
        head, tail = text.split(RESIDENT_MARK)
        return f"{head.rstrip()}\n- 还欠着一包桂花糖。[局:jB]\n{RESIDENT_MARK}{tail}"

    edit_reply(run_copy, "memory.json", "sync-2", "merge", keep_candy)
    handbook = next(f for f in walkthrough(run_copy)["forgetting"] if f["file"] == "handbook")
    assert not handbook["ok"]
    assert handbook["wrongly_kept"] == ["jb-candy"]
    assert handbook["recall"] < 1.0


def test_an_earlier_scene_in_the_summary_is_caught(run_copy: Path) -> None:
    def regress(text: str) -> str:
        head, _scene = text.split("## 当前场景")
        return head + "## 当前场景\n第一天傍晚，灯塔底层，铁门刚拉开，林溯提着马灯站在门里。"

    edit_reply(run_copy, "compact.json", "compact-jA", "summary", regress)
    scene = walkthrough(run_copy)["summaries"][0]["latest_scene"]
    assert scene["verdict"] == "earlier" and not scene["ok"]


def test_an_invented_fact_and_a_broken_structure_are_caught(run_copy: Path) -> None:
    edit_reply(run_copy, "memory.json", "sync-1", "recap",
               lambda text: text.replace("## 既定事实", "## 事实") + "\n- 其实灯塔闹鬼。")
    card = walkthrough(run_copy)
    assert not card["recaps"][0]["structure"]["ok"]
    assert {"fact": "ns-ghost", "artifact": "sync-1:recap:jA"} in card["abstention"]["violations"]


def test_a_resident_over_the_cap_fails_its_structure(run_copy: Path) -> None:
    edit_reply(run_copy, "memory.json", "sync-1", "merge", lambda text: text + "\n" + "长" * 1200)
    merge = walkthrough(run_copy)["merges"][0]
    assert not merge["resident"]["ok"]
    assert any("超过上限" in p for p in merge["resident"]["problems"])


def test_a_mangled_context_file_fails_the_budget(run_copy: Path) -> None:
    path = run_copy / "sim" / "txt" / "new-chat-history.txt"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("## 阿简的玩法偏好", "## 阿简的玩法偏好\n" + "多" * 4000), encoding="utf-8")
    budget = {b["step"]: b for b in walkthrough(run_copy)["budget"]}
    assert not budget["assemble-jC"]["ok"]


def test_model_runs_are_labelled_by_what_they_are() -> None:
    assert provenance_of({"kind": "model", "model": "gpt-x"})["label"] == "真实模型 gpt-x 的输出"
    plumbing = provenance_of({"kind": "model", "model": "gemma", "plumbing_run": True})
    assert plumbing["plumbing_run"] and "不代表摘要质量" in plumbing["label"]


def test_gold_blocks_are_validated_with_chinese_messages() -> None:
    with pytest.raises(GoldError, match="没有这个局"):
        parse_gold({"facts": [{"id": "a", "chat": "jZ", "text": "t", "match": ["x"]}]}, ["jA"])
    with pytest.raises(GoldError, match="match"):
        parse_gold({"facts": [{"id": "a", "chat": "jA", "text": "t", "match": []}]}, ["jA"])
    with pytest.raises(GoldError, match="重复"):
        parse_gold({"facts": [{"id": "a", "chat": "jA", "text": "t", "match": ["x"]}],
                    "never_said": [{"id": "a", "text": "t", "match": ["y"]}]}, ["jA"])
    with pytest.raises(GoldError, match="五节之一"):
        parse_gold({"facts": [{"id": "a", "chat": "jA", "text": "t", "match": ["x"], "section": "杂项"}]}, ["jA"])
    with pytest.raises(GoldError, match="从第几轮开始"):
        parse_gold({"scenes": [{"id": "s", "chat": "jA", "text": "t", "match": ["x"]}]}, ["jA"])
    assert not parse_gold(None, ["jA"])


def test_the_committed_scenarios_declare_gold() -> None:
    walkthrough_gold = load_gold(ROOT / "sim" / "scenarios" / "walkthrough.yaml")
    assert len(walkthrough_gold.facts) >= 15 and walkthrough_gold.never_said and walkthrough_gold.scenes
    assert any(f.also for f in walkthrough_gold.facts)  # forgetting has something that must stay
    assert load_gold(ROOT / "sim" / "scenarios" / "longchat.yaml").facts


def test_committed_scorecards_are_up_to_date() -> None:
    fresh = results(ROOT, ["scorecards"])
    stale = [rel for rel, text in fresh.items() if (ROOT / rel).read_text(encoding="utf-8") != text]
    assert not stale, f"过期：{stale}；运行 python -m harness eval scorecards"


def test_committed_strategy_comparison_and_chart_are_up_to_date() -> None:
    fresh = results(ROOT, ["strategies"])
    stale = [rel for rel, text in fresh.items() if (ROOT / rel).read_text(encoding="utf-8") != text]
    assert not stale, f"过期：{stale}；运行 python -m harness eval strategies"


def test_check_mode_reports_drift_and_writes_nothing(run_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_copy / "sim" / "out" / "eval.json").write_text("{}\n", encoding="utf-8")
    assert main(["scorecards", "--check", "--root", str(run_copy)]) == 1
    assert "sim/out/eval.json 过期了" in capsys.readouterr().out
    assert (run_copy / "sim" / "out" / "eval.json").read_text(encoding="utf-8") == "{}\n"
    assert main(["scorecards", "--root", str(run_copy)]) == 0
    assert "写出 sim/out/eval.json" in capsys.readouterr().out  # the stale one is rewritten ...
    assert main(["scorecards", "--root", str(run_copy)]) == 0
    again = capsys.readouterr().out
    assert "写出" not in again and "没有变化，没有重写" in again  # ... and current ones are not
    assert main(["scorecards", "--check", "--root", str(run_copy)]) == 0


def test_each_model_run_folder_gets_its_own_labelled_scorecard(run_copy: Path) -> None:
    folder = run_copy / "sim" / "runs" / "local-gemma"
    (folder / "out").mkdir(parents=True)
    shutil.copytree(run_copy / "sim" / "txt", folder / "txt")
    for name in ("compact.json", "memory.json"):
        data = json.loads((run_copy / "sim" / "out" / name).read_text(encoding="utf-8"))
        data["model"] = {"kind": "model", "model": "gemma-3-270m", "plumbing_run": True}
        (folder / "out" / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    files = results(run_copy, ["scorecards"])
    assert set(files) == {"sim/out/eval.json", "sim/runs/local-gemma/eval.json", "sim/eval/scorecards.md"}
    card = json.loads(files["sim/runs/local-gemma/eval.json"])
    assert card["provenance"]["plumbing_run"] is True and card["provenance"]["model"] == "gemma-3-270m"
    table = files["sim/eval/scorecards.md"]
    assert table.index("只检验评分器本身") < table.index("管线演示（gemma-3-270m）")
    assert "`sim/runs/local-gemma/eval.json`" in table


def test_a_call_without_a_reply_fails_its_structure_instead_of_vanishing(run_copy: Path) -> None:
    path = run_copy / "sim" / "out" / "memory.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    sync = next(s for s in data["steps"] if s["id"] == "sync-1")
    for call in sync["calls"]:
        call["reply"], call["error"] = None, "HTTP 500"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    card = walkthrough(run_copy)
    assert card["recaps"][0]["structure"] == {"ok": False, "problems": ["没有回复：HTTP 500"], "chars": 0}
    assert card["merges"][0]["structure"]["ok"] is False


def test_a_refused_summary_scores_zero_with_its_reason(run_copy: Path) -> None:
    # A reply that holds every fact but fails validation did not land: recall counts it 0.
    edit_reply(run_copy, "compact.json", "compact-jA", "summary", lambda text: text + "\n\n" + text)
    card = walkthrough(run_copy)
    summary = card["summaries"][0]
    assert summary["landed"] is False and "出现了 2 次" in summary["refused"]
    assert summary["recall"]["recall"] == 1.0  # the facts are there ...
    rows = dict(scorecard_rows(card))
    assert rows["事实召回"].startswith("摘要 0/12（拒收）")  # ... and still score 0
    assert "摘要（compact-jA）被拒收" in rows["拒收"]
    facts = [{"id": "ja-buoy", "text": "七号浮标"}]
    assert _fact_table(card, facts)[-1].startswith("| 七号浮标 | 拒 |")


def test_a_reply_that_copies_its_conversation_is_scored_without_the_copy(run_copy: Path) -> None:
    path = run_copy / "sim" / "out" / "compact.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    call = next(c for s in data["steps"] if s["id"] == "compact-jA" for c in s["calls"] if c["purpose"] == "summary")
    conversation = call["request"]["user"].split("<conversation", 1)[1].split("\n", 1)[1].split("</conversation>")[0]
    # The five headings with the transcript pasted under the first: valid, and every fact "found".
    headings = ["## 前情提要", "## 当前场景", "## 人物与关系", "## 承诺与伏笔", "## 用户偏好"]
    call["reply"]["text"] = "\n\n".join([headings[0], conversation, *[f"{h}\n- 略" for h in headings[1:]]])
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    summary = walkthrough(run_copy)["summaries"][0]
    assert summary["recall"]["echo"]["mostly_echo"] is True
    assert summary["recall"]["recall"] < 0.5


def test_the_scorecard_page_explains_every_mark_and_never_passes_an_empty_check() -> None:
    table = (ROOT / "sim" / "eval" / "scorecards.md").read_text(encoding="utf-8")
    assert SCORECARD_LEGEND in table and table.count(FACT_LEGEND) == table.count("??? note")
    for mark in ("✓", "✗", "拒", "—"):
        assert mark in FACT_LEGEND
    # longchat has no resident summary: its budget row must not say the resident went out whole.
    longchat = table.split("场景 `longchat`")[1].split("场景 `")[0]
    budget = next(line for line in longchat.splitlines() if line.startswith("| 预算"))
    assert "整段送出" not in budget and NOT_APPLICABLE in budget
    # The plumbing run's replies were all refused: no recall above 0.
    plumbing = table.split("管线演示")[1]
    recall = next(line for line in plumbing.splitlines() if line.startswith("| 事实召回") and "摘要" in line)
    found = re.findall(r"(\d+)/\d+", recall)
    assert found and set(found) == {"0"}, recall
