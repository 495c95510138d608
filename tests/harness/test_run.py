"""Running scenarios: byte-stable, in step with the committed sim/, and drift is caught and shown."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main
from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.review import check, diff_against
from harness.running.runner import run_scenarios

QUIET = Progress(quiet=True)


def run_into(root: Path, out: Path, names: list[str] | None = None) -> dict[str, bytes]:
    with open_setup("scripted", root) as setup:
        report = run_scenarios(names, root=root, setup=setup, out_base=out, progress=QUIET)
    assert report.failures == []
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_two_runs_give_identical_bytes_and_no_machine_details(root: Path, tmp_path: Path) -> None:
    first = run_into(root, tmp_path / "a")
    second = run_into(root, tmp_path / "b")
    assert first == second
    assert {"out/compact.json", "out/memory.json", "txt/summary.txt", "txt/forget-prompt-tail.txt"} <= set(first)
    for rel, data in first.items():
        text = data.decode("utf-8")
        assert "\r" not in text and text.endswith("\n") and not text.endswith("\n\n"), rel
        for machine_detail in (str(tmp_path), str(root), "liyuan-sim-", "/tmp/", "/dev/shm"):
            assert machine_detail not in text, (rel, machine_detail)


def test_every_file_the_docs_include_exists(root: Path) -> None:
    names = ["summary-prompt", "summary", "summary-history", "recap-prompt", "recap-A", "recap-B",
             "merge-prompt", "handbook-1", "resident-1", "fit", "forget-prompt-user", "forget-prompt-tail",
             "resident-2", "handbook-2"]
    for name in names:
        assert (root / "sim" / "txt" / f"{name}.txt").is_file(), name
    for name in ("compact", "memory"):
        assert (root / "sim" / "out" / f"{name}.json").is_file(), name


def test_committed_artifacts_are_in_step_with_the_code(root: Path) -> None:
    result = check(root, QUIET)
    assert result.ok, result.report()


def test_check_fails_with_a_readable_diff_after_a_one_word_prompt_change(
    root: Path, change_prompt: Callable[[str, str, str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    change_prompt("summary_system.j2", "场记", "书记")
    result = check(root, QUIET)
    assert not result.ok
    changed = {d.path for d in result.diffs}
    assert "txt/summary-prompt.txt" in changed and "out/compact.json" in changed
    report = result.report()
    assert "✗ sim/txt/summary-prompt.txt（内容不同）" in report
    assert "-你是一场长篇角色扮演的场记。" in report
    assert "+你是一场长篇角色扮演的书记。" in report
    assert main(["check", "-q", "--root", str(root)]) == 1
    assert "书记" in capsys.readouterr().out


def test_a_template_change_elsewhere_is_caught_too(
    root: Path, change_prompt: Callable[[str, str, str], None]
) -> None:
    change_prompt("merge_system.j2", "记忆管理员", "记忆守护者")
    changed = {d.path for d in check(root, QUIET).diffs}
    assert {"txt/merge-prompt.txt", "out/memory.json"} <= changed
    assert "txt/summary-prompt.txt" not in changed


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.test", "HOME": str(repo), "PATH": "/usr/bin:/bin"})


def test_diff_shows_a_prompt_change_per_step(
    sim_copy: Path, change_prompt: Callable[[str, str, str], None]
) -> None:
    git(sim_copy, "init", "-q")
    git(sim_copy, "add", "sim")
    git(sim_copy, "commit", "-q", "-m", "artifacts")
    text, count = diff_against(sim_copy, "HEAD", QUIET)
    assert count == 0 and "没有变化" in text
    change_prompt("summary_system.j2", "宁多勿漏", "宁缺毋滥")
    text, count = diff_against(sim_copy, "HEAD", QUIET)
    assert count > 0
    assert "## walkthrough · 步骤 compact-jA（compact）" in text
    assert "### 调用 compact-jA:summary 的prompt · system" in text
    assert "-一条一行：还没兑现的约定、只被提起过一次的线索、还没有答案的疑问。宁多勿漏" in text
    assert "+一条一行：还没兑现的约定、只被提起过一次的线索、还没有答案的疑问。宁缺毋滥" in text
    assert "## sim/txt/summary-prompt.txt（步骤 compact-jA 写的文件）" in text
    # The long chat's automatic compactions use the same template: both show up.
    assert "## longchat · 步骤 play-1（play）" in text
    # Steps whose prompts did not change are not listed.
    assert "步骤 sync-1" not in text


def test_diff_rejects_an_unknown_ref(sim_copy: Path) -> None:
    git(sim_copy, "init", "-q")
    assert main(["diff", "no-such-ref", "-q", "--root", str(sim_copy)]) == 2


def test_a_missing_reply_fails_the_run_and_writes_nothing_into_sim(sim_copy: Path) -> None:
    replies = sim_copy / "sim" / "replies" / "walkthrough.yaml"
    text = replies.read_text(encoding="utf-8")
    replies.write_text(text.replace("  sync-2:merge:", "  sync-2:merge-renamed:"), encoding="utf-8")
    before = {p: p.read_bytes() for p in (sim_copy / "sim").rglob("*") if p.is_file()}
    assert main(["run", "walkthrough", "-q", "--root", str(sim_copy)]) == 1
    after = {p: p.read_bytes() for p in (sim_copy / "sim").rglob("*") if p.is_file()}
    assert after == before


def test_run_reports_progress(root: Path, tmp_path: Path) -> None:
    import io

    stream = io.StringIO()
    with open_setup("scripted", root) as setup:
        run_scenarios(["walkthrough"], root=root, setup=setup, out_base=tmp_path, progress=Progress(stream))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[walkthrough] 开始：")
    assert any("步骤 2/" in line and "compact-jA（compact）" in line for line in lines)
    assert any("模型调用 compact-jA:summary · 脚本回复" in line and " s · " in line and "tokens" in line
               for line in lines)


def test_records_carry_provenance_everywhere(root: Path) -> None:
    for name in ("compact", "memory", "longchat"):
        data = json.loads((root / "sim" / "out" / f"{name}.json").read_text(encoding="utf-8"))
        assert data["model"]["kind"] == "scripted"
        for step in data["steps"]:
            for call in step["calls"]:
                assert call["reply"]["provenance"] == "scripted", (name, call["key"])
                assert len(call["request_sha256"]) == 64
    hand = json.loads((root / "sim" / "out" / "memory.json").read_text(encoding="utf-8"))
    recap_b = next(s for s in hand["steps"] if s["id"] == "recap-jB")
    assert recap_b["outcome"]["provenance"] == "hand-written"
    txt = root / "sim" / "txt"
    assert txt.joinpath("recap-B.txt").read_text(encoding="utf-8").startswith("（手写复盘")
    for reply_file in ("summary", "recap-A", "handbook-1", "resident-1", "handbook-2", "resident-2"):
        assert txt.joinpath(f"{reply_file}.txt").read_text(encoding="utf-8").startswith("（脚本回复"), reply_file


def test_a_rerun_removes_files_its_scenario_no_longer_writes(root: Path, tmp_path: Path) -> None:
    """A step that wrote a file last time and writes nothing now leaves no stale copy."""
    out = tmp_path / "run"
    run_into(root, out, ["walkthrough", "discussion"])
    record_path = out / "out" / "memory.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["steps"][0]["files"].append("txt/recap-Z.txt")  # as if an earlier run had written it
    record_path.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    (out / "txt" / "recap-Z.txt").write_text("旧的一次运行写的\n", encoding="utf-8")
    (out / "txt" / "notes.txt").write_text("不归任何场景管\n", encoding="utf-8")
    discussion_files = {p for p in (out / "txt").glob("discussion-*.txt")}

    run_into(root, out, ["walkthrough"])
    assert not (out / "txt" / "recap-Z.txt").exists()
    assert (out / "txt" / "notes.txt").exists()  # not listed by the scenario: left alone
    assert discussion_files and all(p.exists() for p in discussion_files)  # another scenario's files stay


def test_concurrent_scenarios_write_exactly_what_a_sequential_run_writes(tmp_path: Path) -> None:
    from harness.running.scenario import ScenarioError

    root = Path(__file__).resolve().parents[2]
    names = ["walkthrough", "discussion", "branches"]
    with open_setup("scripted", root) as setup:
        one = run_scenarios(names, root=root, setup=setup, write=False, progress=Progress(quiet=True))
    with open_setup("scripted", root) as setup:
        three = run_scenarios(names, root=root, setup=setup, write=False, progress=Progress(quiet=True),
                              concurrency=3)
    assert one.artifacts.files == three.artifacts.files and len(one.artifacts) > 10
    assert one.calls == three.calls and not three.failures
    with open_setup("scripted", root) as setup, pytest.raises(ScenarioError):
        run_scenarios(names, root=root, setup=setup, write=False, concurrency=0)
