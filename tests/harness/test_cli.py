"""The command line: exit codes, clear errors, and the bench/eval hand-off."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

import pytest

from harness.cli import main


def test_run_into_a_folder(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "walkthrough", "--out", str(tmp_path), "--root", str(root)]) == 0
    captured = capsys.readouterr()
    assert "写出 " in captured.out and "次模型调用" in captured.out
    assert "[walkthrough] 步骤 1/" in captured.err  # progress goes to stderr
    assert (tmp_path / "out" / "compact.json").is_file()
    assert (tmp_path / "txt" / "summary.txt").is_file()


def test_quiet_run_prints_no_progress(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "walkthrough", "-q", "--out", str(tmp_path), "--root", str(root)]) == 0
    assert capsys.readouterr().err == ""


def test_unknown_scenario_is_a_clear_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no-such-scenario", "-q", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "没有这个场景：no-such-scenario" in err and "walkthrough" in err


def test_unknown_model_is_a_clear_error(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "gpt", "-q", "--out", str(tmp_path), "--root", str(root)]) == 2
    assert "不认识的模型：'gpt'" in capsys.readouterr().err


def test_openai_model_needs_a_name(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "openai:", "-q", "--out", str(tmp_path), "--root", str(root)]) == 2
    assert "缺少模型名" in capsys.readouterr().err


def test_replay_needs_a_run_folder(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", f"replay:{tmp_path}", "-q", "--root", str(root)]) == 2
    assert "不是录制目录" in capsys.readouterr().err


def test_check_passes_on_the_committed_tree(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "-q", "--root", str(root)]) == 0
    assert "逐字节相同" in capsys.readouterr().out


def _fake_module(name: str, entry: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
    if entry is not None:
        module.main = entry  # type: ignore[attr-defined]
    return module


def test_bench_and_eval_receive_the_rest_of_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def entry(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setitem(sys.modules, "harness.eval", _fake_module("harness.eval", entry))
    assert main(["eval", "--only", "x", "-q"]) == 3
    assert seen == [["--only", "x", "-q"]]


def test_bench_or_eval_without_an_entry_point(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "harness.bench", _fake_module("harness.bench", None))
    assert main(["bench"]) == 2
    assert "没有 main(argv) 入口" in capsys.readouterr().err


def test_a_run_where_every_model_call_failed_exits_non_zero(root: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # Real requests are blocked in the suite, so every call of this live run fails.
    code = main(["run", "walkthrough", "--model", "openai:side-model-1", "-q", "--out", str(tmp_path),
                 "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 1
    assert "模型调用全部失败" in err
    assert "walkthrough · " in err and "真实模型请求已被禁止" in err  # names the calls and why
