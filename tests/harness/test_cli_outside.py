"""The command line as a newcomer uses it (issue 39): from another folder with ``--root``;
import, run and eval of their own chat leave the committed files alone; a model run in
which every call failed leaves no run folder for 模型对比 to list."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.cli import main
from harness.compare import run_folders

from .conftest import ROOT

TRACKED = ("sim", "docs/assets/strategy-chart.svg")
"""What ``run`` and ``eval`` may write into: the whole of sim/ and the strategy chart."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return {**env, **extra}


def test_the_cli_runs_from_another_folder_with_root(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ways = {
        # the checkout's harness folder run as a program: nothing installed, nothing on the path
        "folder": [sys.executable, str(ROOT / "harness")],
        # python -m harness with the checkout on the path (what an editable install of liyuan does not give)
        "module": [sys.executable, "-m", "harness"],
    }
    for name, command in ways.items():
        out = tmp_path / f"out-{name}"
        env = _env(PYTHONPATH=str(ROOT)) if name == "module" else _env()
        result = subprocess.run([*command, "run", "walkthrough", "-q", "--root", str(ROOT), "--out", str(out)],
                                cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, f"{name}: {result.stderr[-2000:]}"
        assert (out / "out" / "compact.json").is_file() and (out / "txt" / "summary.txt").is_file(), name
        assert list(elsewhere.iterdir()) == [], f"{name} wrote into the current folder"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                   GIT_COMMITTER_EMAIL="t@t")).stdout


def test_import_run_and_eval_change_no_committed_file(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "sim", repo / "sim")
    (repo / "docs" / "assets").mkdir(parents=True)
    shutil.copy2(ROOT / TRACKED[1], repo / TRACKED[1])
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "committed artifacts")
    chat = repo / "sim" / "imports" / "bookshop.jsonl"
    assert main(["import", str(chat), "--out", str(repo / "sim" / "scenarios" / "mine.yaml"), "-q",
                 "--root", str(repo)]) == 0
    assert main(["run", "mine", "-q", "--root", str(repo)]) == 0
    assert main(["eval", "--root", str(repo)]) == 0
    status = _git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    changed = [line for line in status if not line.startswith("??")]
    assert changed == [], f"committed files changed by import + run + eval: {changed}"
    added = sorted(line[3:] for line in status)
    assert "sim/scenarios/mine.yaml" in added and "sim/out/mine.json" in added  # what was asked for
    assert all(path.startswith(("sim/scenarios/mine.yaml", "sim/out/mine.json", "sim/turns/mine.json",
                                "sim/txt/mine-")) for path in added), added


def test_a_model_run_where_every_call_failed_leaves_no_run_folder(sim_copy: Path) -> None:
    # Real requests are blocked in the suite, so every call of this model run fails.
    assert main(["run", "walkthrough", "--model", "openai:side-model-1", "-q", "--root", str(sim_copy)]) == 1
    assert not (sim_copy / "sim" / "runs" / "openai-side-model-1").exists()
    assert run_folders(sim_copy) == [sim_copy / "sim"]  # what 模型对比 lists
