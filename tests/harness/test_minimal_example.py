"""The harness page's minimal example (examples/mini) does what the page says it does.

The page includes these very files, so the example a reader copies is the one this test
runs: it plays two turns, compacts once with the scripted reply, and writes both files its
compact step declares. A step that declares a file it did not write fails the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mini"


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    root = tmp_path / "mini"
    shutil.copytree(EXAMPLE, root)
    return root


def test_the_page_shows_the_files_this_test_runs() -> None:
    page = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")
    assert '--8<-- "examples/mini/sim/scenarios/mini.yaml"' in page
    assert '--8<-- "examples/mini/sim/replies/mini.yaml"' in page
    assert "python -m harness run mini --root examples/mini" in page


def test_the_minimal_example_compacts_and_writes_its_files(mini: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", "mini", "--root", str(mini), "--out", str(out)]) == 0
    assert "1 次模型调用" in capsys.readouterr().out
    prompt = (out / "txt" / "mini-prompt.txt").read_text(encoding="utf-8")
    summary = (out / "txt" / "mini-summary.txt").read_text(encoding="utf-8")
    conversation = prompt.split("</conversation>")[0].split("<conversation")[-1]
    assert "能借宿一晚吗？" in conversation and "灯室在哪？" not in conversation  # the last turn stays verbatim
    assert summary.startswith("（脚本回复：人工撰写的示范，不是模型输出）")
    assert "## 当前场景" in summary


def test_a_step_that_declares_files_it_did_not_write_fails_the_run(mini: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    scenario = mini / "sim" / "scenarios" / "mini.yaml"
    # A threshold the two short turns never reach: the step runs, compacts nothing, writes nothing.
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("min_chars: 50", "min_chars: 5000"),
                        encoding="utf-8")
    assert main(["run", "mini", "-q", "--root", str(mini)]) == 1
    err = capsys.readouterr().err
    assert "声明要写却没有写出：mini-prompt.txt、mini-summary.txt" in err
    assert not (mini / "sim" / "out").exists()  # a failed scripted run writes nothing into sim/
