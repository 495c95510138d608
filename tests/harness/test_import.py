"""``python -m harness import``: chats become scenarios that run without hand-written replies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.importer import CLOSING_USER, import_drift
from harness.running.models import open_setup
from harness.running.placeholder import PLACEHOLDER_LINE
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from harness.running.scenario import load_scenario
from harness.running.story import write_opening
from harness.steps.story_steps import play_turn
from liyuan import Card
from liyuan.clock import counter_ids, fixed_clock
from liyuan.model import OpenAIModel
from liyuan.session.entries import IMPORT_NOTE_TYPE
from liyuan.story.view import story_view

from .conftest import ROOT, FakeEndpoint

FIXTURE = ROOT / "sim" / "imports" / "bookshop.jsonl"
QUIET = Progress(quiet=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty repository root with a scenarios folder."""
    (tmp_path / "repo" / "sim" / "scenarios").mkdir(parents=True)
    return tmp_path / "repo"


def do_import(repo: Path, source: Path, *extra: str, name: str = "mine") -> tuple[int, Path]:
    out = repo / "sim" / "scenarios" / f"{name}.yaml"
    code = main(["import", str(source), "--root", str(repo), "--out", str(out), "-q", *extra])
    return code, out


def test_import_writes_a_scenario_that_loads_with_provenance_and_no_path(repo: Path, tmp_path: Path) -> None:
    private = tmp_path / "私人文件夹 小满的聊天" / "沈砚 - 2026-03-01@20h00m.jsonl"
    private.parent.mkdir()
    shutil.copy(FIXTURE, private)
    code, out = do_import(repo, private)
    assert code == 0
    scenario = load_scenario(out, repo)
    assert scenario.source is not None
    assert dict(scenario.source) == {"format": "sillytavern", "sha256": scenario.source["sha256"],
                                     "messages": 80, "swipes": 8, "notes": 3}
    assert len(scenario.source["sha256"]) == 64
    text = out.read_text("utf-8")
    for leak in ("私人文件夹", "2026-03-01@20h00m", str(tmp_path), ".jsonl"):
        assert leak not in text  # never the file's path or name
    assert (scenario.user, scenario.char, scenario.card) == ("小满", "沈砚", "沈砚")
    assert [s.kind for s in scenario.steps] == ["play", "assemble", "sync"]


def test_the_scenario_plays_back_every_message_and_swipe(repo: Path, tmp_path: Path) -> None:
    """Played the way the play step plays it (through Chat): every swipe on a side branch, chosen ones on the main."""
    code, out = do_import(repo, FIXTURE)
    assert code == 0
    spec = next(iter(load_scenario(out, repo).chats.values()))
    assert len(spec.turns) == 38 and len(spec.greeting_swipes) == 2
    card = Card.open(tmp_path / "card", background=False, clock=fixed_clock(), ids=counter_ids(), auto_sync=False)
    chat = card.chat("imported")
    tree = chat.tree
    write_opening(tree, spec)
    for turn in spec.turns:
        play_turn(chat, turn, mode=spec.mode)
    main_branch = tree.branch()
    all_texts = {e.text for e in tree} | {str(e.data.get("text")) for e in tree}
    records = [json.loads(line) for line in FIXTURE.read_text("utf-8").splitlines()[1:]]
    for record in records:
        assert record["mes"] in {e.text for e in main_branch} | {str(e.data.get("text")) for e in main_branch}
        for swipe in record.get("swipes") or []:
            assert swipe in all_texts
    assert len(tree) - len(main_branch) == 8  # the swiped-away ones, beside the main branch
    notes = [e for e in main_branch if e.custom_type == IMPORT_NOTE_TYPE]
    assert len(notes) == 3 and not any(e.custom_type == IMPORT_NOTE_TYPE for e in story_view(main_branch))


def test_imported_chat_runs_with_placeholders_labelled_on_their_first_line(repo: Path) -> None:
    code, _ = do_import(repo, FIXTURE, name="bookshop")
    assert code == 0
    with open_setup("scripted", repo) as setup:
        report = run_scenarios(["bookshop"], root=repo, setup=setup, progress=QUIET)
    assert report.failures == [] and report.written
    record = json.loads((repo / "sim" / "out" / "bookshop.json").read_text("utf-8"))
    play = record["steps"][0]
    assert [c["after_turn"] for c in play["outcome"]["compactions"]] == [36]
    calls = [c for s in record["steps"] for c in s["calls"]]
    assert [c["purpose"] for c in calls] == ["summary", "recap", "merge"]
    assert all(c["reply"]["provenance"] == "placeholder" for c in calls)
    assert "占位" in record["model"]["note"]
    for name in ("bookshop-summary-1.txt", "bookshop-recap.txt", "bookshop-resident.txt"):
        text = (repo / "sim" / "txt" / name).read_text("utf-8")
        assert text.splitlines()[0] == PLACEHOLDER_LINE
        body = text.split("\n\n", 1)[1]
        sections = [part for part in body.split("\n## ") if part.strip()]
        assert all("不是模型输出" in part for part in sections)  # every section says so
    history = (repo / "sim" / "txt" / "bookshop-history.txt").read_text("utf-8")
    assert "【前情提要】" in history and "占位" in history.splitlines()[0]
    assert CLOSING_USER in history


def test_with_a_real_model_the_replies_go_to_its_run_folder(
    repo: Path, tmp_path: Path, allow_model_requests: None
) -> None:
    code, _ = do_import(repo, FIXTURE, name="bookshop")
    assert code == 0
    endpoint = FakeEndpoint("（这不是一份合格的摘要）")
    model = OpenAIModel(model="mock-model-1", base_url="https://llm.example.test/v1", api_key="sk-test",
                        http_client=endpoint.client(), max_retries=0)
    with open_setup("openai:mock-model-1", repo, model=model) as setup:
        assert setup.out_rel == "sim/runs/openai-mock-model-1"
        report = run_scenarios(["bookshop"], root=repo, setup=setup, progress=QUIET)
    assert endpoint.requests  # the model was asked, no placeholder answered
    record = json.loads((repo / setup.out_rel / "out" / "bookshop.json").read_text("utf-8"))
    calls = [c for s in record["steps"] for c in s["calls"]]
    assert calls and all(c["reply"]["provenance"] == "model:mock-model-1" for c in calls)
    assert (repo / setup.out_rel / "replies" / "bookshop.yaml").is_file()
    assert not (repo / "sim" / "out").exists()
    assert report.calls == len(endpoint.requests)


def test_a_chat_that_ends_on_a_user_message_assembles_with_it(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "在吗"}, {"role": "assistant", "content": "在。"},
                               {"role": "user", "content": "明天见？"}], ensure_ascii=False), "utf-8")
    code, out = do_import(repo, log, "--chat", "我的一局")
    assert code == 0
    scenario = load_scenario(out, repo)
    (chat_id, spec), = scenario.chats.items()
    assert chat_id.startswith("-") is False and chat_id != "我的一局" and spec.name == "我的一局"
    assert scenario.step("next-turn").params["user"] == "明天见？"
    assert (scenario.user, scenario.char) == ("用户", "角色")


@pytest.mark.parametrize(("content", "words"), [
    (b"", "空的"),
    (b'{"user_name": "a", "character_name": "b"}\n{"name": "b", "mes": 3}\n', "第 2 行，字段 mes"),
    (b'[{"role": "narrator", "content": "x"}]', "字段 role"),
    (b'[{"role": "assistant", "content": "only a greeting"}]', "没有一问一答"),
])
def test_bad_input_exits_2_with_a_chinese_error_and_writes_nothing(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, words: str
) -> None:
    source = tmp_path / "chat.jsonl"
    source.write_bytes(content)
    code, out = do_import(repo, source)
    assert code == 2
    err = capsys.readouterr().err
    assert words in err and "什么都没有写" in err
    assert not out.exists() and list((repo / "sim" / "scenarios").iterdir()) == []


def test_import_prints_progress_on_stderr(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = repo / "sim" / "scenarios" / "p.yaml"
    assert main(["import", str(FIXTURE), "--root", str(repo), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "80 条消息" in captured.err and "38 轮" in captured.err
    assert "python -m harness run p" in captured.out


def test_committed_import_matches_a_fresh_import_and_drift_is_caught(root: Path, tmp_path: Path) -> None:
    assert import_drift(root) == []
    copy = tmp_path / "repo"
    shutil.copytree(root / "sim" / "imports", copy / "sim" / "imports")
    shutil.copytree(root / "sim" / "scenarios", copy / "sim" / "scenarios")
    path = copy / "sim" / "scenarios" / "bookshop.yaml"
    text = path.read_text("utf-8")
    path.write_text(text.replace("包宵夜，不包工钱以外的任何东西", "包宵夜", 1), "utf-8")
    diffs = import_drift(copy)
    assert [d.path for d in diffs] == ["scenarios/bookshop.yaml"] and "包宵夜，不包工钱以外的任何东西" in diffs[0].diff


def test_the_committed_scenario_records_what_the_fixture_holds(root: Path) -> None:
    raw = yaml.safe_load((root / "sim" / "scenarios" / "bookshop.yaml").read_text("utf-8"))
    assert raw["source"]["format"] == "sillytavern" and raw["source"]["messages"] == 80
    assert (root / "sim" / "txt" / "bookshop-summary-1.txt").read_text("utf-8").startswith(PLACEHOLDER_LINE)
