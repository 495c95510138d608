"""``harness compare`` and the 「模型对比」 page built from run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from tests.docs.hook import load_hook

RECORDED = "sim/runs/local-gemma3-270m"


def test_compare_works_with_the_committed_runs(root: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "compare.md"
    runs = [str(root / "sim"), *map(str, (root / "sim" / "runs").iterdir())]
    assert main(["compare", "--root", str(root), *runs, "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert len(summary.splitlines()) <= 5 and "写出" in summary and "38 次调用" in summary  # a summary, not the page
    text = out.read_text(encoding="utf-8")
    assert "脚本回复（人工撰写的示范，不是模型输出）" in text
    assert "gemma-3-270m-q4_k_m（管线演示，不代表质量）" in text
    assert "### memory · sync-1（sync）· `sync-1:merge`" in text
    assert main(["compare", "--root", str(root), *runs, "--out", "-"]) == 0
    assert capsys.readouterr().out == text  # `--out -` prints the page
    table = text[text.index("## 评分卡"):]
    assert "| walkthrough | 事实召回 |" in table and "| 全部 | tokens（输入→输出） |" in table


def test_compare_refuses_a_folder_that_is_not_a_run(root: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--root", str(root), str(tmp_path)]) == 2
    assert "不是一次运行的目录" in capsys.readouterr().err


def test_the_page_shows_every_run_folder(sim_copy: Path, root: Path) -> None:
    """Two fake run folders, made here by replaying the committed recording, labelled as such."""
    for name in ("replay-a", "replay-b"):
        with open_setup(f"replay:{RECORDED}", root) as setup:
            run_scenarios(["walkthrough", "discussion"], root=root, setup=setup,
                          out_base=sim_copy / "sim" / "runs" / name, progress=Progress(quiet=True))
        info_path = sim_copy / "sim" / "runs" / name / "run.json"
        info = json.loads(info_path.read_text(encoding="utf-8"))
        info.update(model=f"测试用重放 {name}", plumbing_run=False, note="测试里重放录制做出来的目录，不是新的模型输出")
        info_path.write_text(json.dumps(info, ensure_ascii=False), encoding="utf-8")
    page = load_hook("compare_page").build(sim_copy)
    assert '=== "测试用重放 replay-a"' in page and '=== "测试用重放 replay-b"' in page
    assert '=== "脚本回复（人工撰写的示范，不是模型输出）"' in page
    header = "| 场景 | 检查 | 脚本回复（人工撰写的示范，不是模型输出） | 测试用重放 replay-a | 测试用重放 replay-b |"
    assert header in page
    assert "目前只有管线演示" not in page


def test_with_only_the_plumbing_run_the_page_says_so(root: Path) -> None:
    page = load_hook("compare_page").build(root)
    assert "目前只有管线演示，不是质量证据" in page
    assert f"`{RECORDED}`" in page


def test_labels_follow_each_replys_provenance(root: Path) -> None:
    # Issue 27: bookshop's replies are the harness's placeholders, not hand-written demos; the
    # scripted run reports no usage (not 0→0); a run that has a scenario is never "没有这个场景".
    import re

    page = load_hook("compare_page").build(root)
    tabs = re.findall(r'^=== "([^"]+)"\n\n    ```+text\n(.*?)\n    ```', page, re.M | re.S)
    labels = {label for label, text in tabs if "占位" in text and "不是模型输出" in text}
    assert labels == {"框架生成的占位（不是模型输出，也不是人写的示范）"}, labels  # every placeholder says so
    memory = page[page.index("### memory · sync-1"):]
    assert '=== "脚本回复（人工撰写的示范，不是模型输出）"' in memory
    runs = page[page.index("## 参与对比的运行"):page.index("## 每一次调用的回复")]
    assert "tokens 0→0" not in runs and "tokens 未报告（脚本回复没有用量）" in runs
    table = page[page.index("## 评分卡"):]
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        scripted = cells[2]  # the scripted run (sim/) has every scenario
        assert scripted != "（没有这个场景）", line
