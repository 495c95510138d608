"""The command line: one dispatch, each subcommand's own parser and help, the project root, exit codes."""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness.cli import SUBCOMMANDS, main
from harness.running import command as command_module
from harness.running.command import Subcommand, find_root
from liyuan.errors import ConfigError


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


def _fake_module(name: str, seen: list[argparse.Namespace]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--only")
        parser.add_argument("-q", action="store_true")

    def run(args: argparse.Namespace) -> int:
        seen.append(args)
        return 3

    module.COMMANDS = (Subcommand("eval", "帮助", "说明", configure, run),)  # type: ignore[attr-defined]
    return module


def test_each_subcommand_gets_the_parser_its_module_defines(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.Namespace] = []
    monkeypatch.setitem(sys.modules, "harness.eval", _fake_module("harness.eval", seen))
    assert main(["eval", "--only", "x", "-q"]) == 3
    assert seen[0].only == "x" and seen[0].q


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_has_its_own_help_text(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(SUBCOMMANDS[name][0])
    command = next(c for c in module.COMMANDS if c.name == name)
    assert command.help and len(command.description) > len(command.help)
    with pytest.raises(SystemExit) as info:
        main([name, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"python -m harness {name}" in out and command.description[:20] in out.replace("\n", "")


def test_run_does_not_load_the_other_subcommands() -> None:
    probe = ("import sys\nfrom harness.cli import _parser\n_parser('run')\n"
             "print(sorted(m for m in sys.modules\n"
             "             if m.startswith(('harness.bench', 'harness.eval', 'harness.compare'))))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_a_root_without_a_project_is_refused_before_anything_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["run", "--root", str(tmp_path)], ["check", "--root", str(tmp_path)],
                 ["eval", "--root", str(tmp_path)], ["import", "x.jsonl", "--root", str(tmp_path)]):
        assert main(argv) == 2, argv
        assert "不是梨园的项目目录：里面没有 sim/scenarios/" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_root_is_found_from_a_subfolder_and_refused_when_there_is_none(root: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_root(start=root / "docs") == root
    monkeypatch.setattr(command_module, "__file__", str(tmp_path / "site-packages" / "harness" / "running" / "x.py"))
    with pytest.raises(ConfigError, match="找不到梨园的项目目录"):
        find_root(start=tmp_path)


def test_a_run_where_every_model_call_failed_exits_non_zero(root: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # Real requests are blocked in the suite, so every call of this live run fails.
    code = main(["run", "walkthrough", "--model", "openai:side-model-1", "-q", "--out", str(tmp_path),
                 "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 1
    assert "模型调用全部失败" in err
    assert "walkthrough · " in err and "真实模型请求已被禁止" in err  # names the calls and why


def test_a_project_without_scenarios_says_so_instead_of_an_empty_choice(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sim" / "scenarios").mkdir(parents=True)
    assert main(["run", "mine", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "里还没有场景" in err and "可选：）" not in err
