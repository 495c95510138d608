"""Recall on public sets that chose nothing (``python -m harness eval public``, issue 36).

CI cannot fetch LoCoMo or MADial-Bench (they live in other repositories, LoCoMo under a
non-commercial licence, and CI has no network): these tests run the loaders and the
measurement on tiny sets written here in the data sets' own formats, and check the
committed snapshot ``sim/eval/public`` (measured where the data was) — it names each data
set's repository and commit, renders to the Markdown the page includes, and its figures
are not typed on the page. The committed snapshot is the evidence for the public figures.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from harness.eval.public import CONFIGS, DiskMemo, measure_locomo, measure_madial
from harness.eval.public_data import load_locomo, load_madial
from harness.eval.public_report import public_markdown, verdicts
from liyuan.vector import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "sim" / "eval" / "public.json"


def _locomo(tmp_path: Path) -> Path:
    conversation = {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1 May 2023", "session_1_summary": "not a turn list",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pepper."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! My bakery opens next week."}],
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Pepper knocked over my violin stand.",
                       "blip_caption": "a cat next to a violin"},
                      {"speaker": "Bo", "dia_id": "D2:2", "text": "The bakery sold out of croissants."}],
        "qa": [{"question": "What is the name of Ann's kitten?", "evidence": ["D1:1"], "category": 1},
               {"question": "What does Bo's bakery sell?", "evidence": ["D:2:02; D1:2"], "category": 4},
               {"question": "What did Ann's dog eat?", "evidence": ["D1:1"], "category": 5},
               {"question": "Nothing points anywhere", "evidence": ["D9:9"], "category": 2}],
    }
    path = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data/x/26.json", json.dumps(conversation))
    return path


def _madial(tmp_path: Path) -> Path:
    for folder in ("ch", "en"):
        (tmp_path / "data" / folder).mkdir(parents=True)
    memories = {"1": "Bart在圣诞节晚会上跳舞，感觉非常开心。", "2": "Bart在海边放风筝，感到非常开心。",
                "3": "Lisa的小狗生病了，她很难过。"}
    owners = {"1": 1, "2": 1, "3": 2}
    (tmp_path / "data/ch/MADial-Bench-zh-memory.json").write_text("\n".join(
        json.dumps({k: {"event": v, "user-id": owners[k]}}, ensure_ascii=False) for k, v in memories.items()))
    (tmp_path / "data/en/MADial-Bench-en-memory.json").write_text("\n".join(
        json.dumps({k: {"event": f"memory {k} of user {owners[k]}"}}) for k in memories))
    dialogue = {"dialogue": ["<BOD>\n", '<Bart>:"元旦晚会我要表演！"\n', '<Assistant>:"太棒了！"\n',
                             '<Bart>:"我想再跳一次圣诞节那支舞。"\n', '<Assistant>:"你记得圣诞节晚会吗？"\n',
                             "<EOD>\n"],
                "test-turn": [4, 6], "relevant-id": [1], "user-id": 1}
    for folder, language in (("ch", "zh"), ("en", "en")):
        (tmp_path / f"data/{folder}/MADial-Bench-{language}-dialogue.json").write_text(
            json.dumps(dialogue, ensure_ascii=False) + "\n")
    return tmp_path


def test_locomo_is_read_as_an_app_would_store_it(tmp_path: Path) -> None:
    [conversation] = load_locomo(_locomo(tmp_path))
    assert [len(s) for s in conversation.sessions] == [2, 2]
    assert conversation.sessions[1][0] == (
        "D2:1", "Ann：Pepper knocked over my violin stand. [image: a cat next to a violin]")
    # adversarial questions (category 5) and questions whose evidence names no turn are left out;
    # malformed ids ("D:2:02") are read as the turn they name
    assert [(q.text, sorted(q.relevant)) for q in conversation.questions] == [
        ("What is the name of Ann's kitten?", ["D1:1"]), ("What does Bo's bakery sell?", ["D1:2", "D2:2"])]


def test_madial_queries_are_the_last_utterance_and_the_dialogue_before_the_first_test_turn(tmp_path: Path) -> None:
    data = load_madial(_madial(tmp_path), "zh")
    assert data.memories == {
        1: {"1": "Bart在圣诞节晚会上跳舞，感觉非常开心。", "2": "Bart在海边放风筝，感到非常开心。"},
        2: {"3": "Lisa的小狗生病了，她很难过。"}}
    [(user, last)] = data.questions["last"]
    assert (user, last.text, last.relevant) == (1, "我想再跳一次圣诞节那支舞。", frozenset({"1"}))
    history = data.questions["history"][0][1].text
    assert history == "Bart：元旦晚会我要表演！\nAssistant：太棒了！\nBart：我想再跳一次圣诞节那支舞。"
    # the English memories name no user: each belongs to the user of the same id in the Chinese file
    assert load_madial(tmp_path, "en").memories[2] == {"3": "memory 3 of user 2"}


def test_the_measurement_searches_through_the_library_and_can_miss(tmp_path: Path) -> None:
    memo = DiskMemo(HashEmbedder(), tmp_path / "cache")
    sets = measure_locomo(load_locomo(_locomo(tmp_path)), memo, tmp_path / "stores", say=lambda _l: None)
    turn = sets["locomo-turn"]
    assert (turn["queries"], turn["documents"]) == (2, 4)
    assert list(turn["recall"]) == list(CONFIGS)
    # each question's words are in its evidence turns, and four chunks all fit in the top 5
    assert turn["recall"]["关键词"] == {"hit": 1.0, "share": 1.0}
    # an archive chunk holds whole sessions here: one per session
    assert (sets["locomo-archive"]["documents"], sets["locomo-archive"]["conversations"]) == (2, ["26"])
    madial = measure_madial({"zh": load_madial(_madial(tmp_path), "zh")}, memo, tmp_path / "m", say=lambda _l: None)
    # user 2's memory is never searched for user 1's dialogue, so the one relevant memory is in the top 5
    assert madial["madial-zh-last"]["recall"]["e5"]["share"] == 1.0
    # the vectors were cached on disk: a second memo embeds nothing
    again = DiskMemo(HashEmbedder(), tmp_path / "cache")
    measure_locomo(load_locomo(_locomo(tmp_path)), again, tmp_path / "stores2", say=lambda _l: None)
    assert again.embedded == 0


def _snapshot() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return data


def test_the_committed_snapshot_names_each_data_sets_repository_and_commit() -> None:
    data = _snapshot()
    assert {s["repo"] for s in data["sources"].values()} == {"snap-research/locomo", "hejunqing/MADial-Bench"}
    for source in data["sources"].values():
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
    assert set(data["sets"]) == {"locomo-turn", "locomo-archive", "madial-zh-last", "madial-zh-history",
                                 "madial-en-last", "madial-en-history"}
    text = public_markdown(data)
    for source in data["sources"].values():
        assert source["commit"] in text


def test_the_verdict_says_a_miss_as_a_miss() -> None:
    data = _snapshot()
    name = next(iter(data["sets"]))
    low = json.loads(json.dumps(data))
    low["sets"][name]["recall"]["默认"]["hit"] = low["sets"][name]["recall"]["关键词"]["hit"] + 0.01
    assert verdicts(low)[name][0] is False
    assert "**没做到**" in public_markdown(low)


def _public_section() -> list[str]:
    lines = (ROOT / "docs" / "eval.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "{ #public }" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def test_the_page_includes_the_snapshot_and_types_none_of_its_figures() -> None:
    section = _public_section()
    assert any('--8<-- "sim/eval/public.md"' in line for line in section)
    figures = {f"{cell[m]:.3f}" for result in _snapshot()["sets"].values() for cell in result["recall"].values()
               for m in ("hit", "share")}
    typed = [line for line in section if "--8<--" not in line and any(f in line for f in figures)]
    assert not typed, "这些数字是手打的，应当来自 sim/eval/public.md：\n" + "\n".join(typed)
