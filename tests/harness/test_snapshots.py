"""The site's figures: every one is read from a committed, stamped measurement snapshot.

- each ``sim/eval/<name>.md`` is the rendering of its ``<name>.json`` (a page that includes
  the Markdown cannot disagree with the measurement);
- each snapshot names the commit it measured, when, on what and how busy the machine was;
- a missed target is said as missed;
- the two pages that quote measurements (评测, 几台服务器) type no timing, size or ratio figure
  of their own: they include the snapshots.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.eval import results
from harness.eval.snapshots import SNAPSHOTS, render

ROOT = Path(__file__).resolve().parents[2]
EVAL = ROOT / "sim" / "eval"
PAGES = ("docs/eval.md", "docs/deploy.md")


def _snapshot(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVAL / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_each_snapshot_is_committed_with_its_rendering(name: str) -> None:
    assert (EVAL / f"{name}.md").read_text(encoding="utf-8") == render(name, _snapshot(name))


def test_harness_eval_check_covers_the_snapshots() -> None:
    fresh = results(ROOT, ["snapshots"])
    assert sorted(fresh) == sorted(f"sim/eval/{name}.md" for name in SNAPSHOTS)
    for rel, text in fresh.items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel} 过期：运行 python -m harness eval"


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_each_snapshot_names_the_commit_the_time_the_machine_and_the_load(name: str) -> None:
    machine = _snapshot(name)["machine"]
    assert re.fullmatch(r"[0-9a-f]{12}", machine["commit"]), machine["commit"]
    known = subprocess.run(["git", "cat-file", "-e", f"{machine['commit']}^{{commit}}"], cwd=ROOT,
                           capture_output=True, check=False)
    assert known.returncode == 0, f"{name}: 提交 {machine['commit']} 不在这个仓库的历史里"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", machine["measured_at"])
    assert machine["cpu"] and machine["cores"] and machine["python"] and machine["system"]
    assert isinstance(machine["load_start"], float | int) and isinstance(machine["load_end"], float | int)
    rendered = render(name, _snapshot(name))
    assert rendered.startswith(f"测量于 {machine['measured_at']}，提交 `{machine['commit']}`")


def _long(open_s: float, p50_big: float) -> dict[str, Any]:
    row = {"100": {"p50_ms": 1.0, "p95_ms": 2.0}, "100000": {"p50_ms": p50_big, "p95_ms": 2.5}}
    opened = {"100": {"open_s": 0.01, "peak_mb": 10.0, "base_mb": 9.0, "file_mb": 0.3, "first_recall_hits": 5},
              "100000": {"open_s": open_s, "open_s_runs": [open_s], "peak_mb": 130.0, "base_mb": 10.0,
                         "file_mb": 98.0, "first_recall_hits": 5}}
    return {"machine": {"measured_at": "2026-12-05 19:00 UTC", "commit": "0" * 12, "dirty": False, "cpu": "CPU",
                        "cores": 2, "python": "3.11.7", "system": "Linux", "load_start": 0.5, "load_end": 0.6},
            "sizes": [100, 100000], "timed_turns": 100, "turns": {"向量开·账本有": row},
            "open": {"向量关": opened, "向量开": opened | {"100000": opened["100000"] | {"open_s": 2.77}}},
            "recall_at_cap": {"chunks": 50000, "open_s": 3.1, "first_recall_hits": 5, "ready_s": 7.7,
                              "recall_p50_ms": 9.8, "recall_p95_ms": 10.3},
            "sync": {"10": {"p50_ms": 4.0}, "500": {"p50_ms": 140.0}}}


def test_a_missed_target_is_said_as_missed_and_nothing_claims_all_met() -> None:
    text = render("long", _long(open_s=1.26, p50_big=1.24))
    # vector memory on opens 100,000 turns in 2.77 s against the 1.5 s target: missed, and said so
    assert "向量开，100,000 轮打开不到 1.5 秒：**没达到**（2.77 秒）" in text
    assert "向量关，100,000 轮打开不到 1.5 秒：达到（1.26 秒）" in text
    assert "目标都达到了" not in text
    slow = render("long", _long(open_s=1.26, p50_big=1.6))
    assert "每轮 p50：100,000 轮不超过 100 轮的 1.5 倍（每种组合都算）：**没达到**，最差 1.60×" in slow


_FIGURE = re.compile(r"\d[\d,.]*\s*(?:ms|毫秒|秒|s\b|MB|倍|×)")
_BOUND = re.compile(r"(?:不超过|不到|≤|<|上限|时限|最多|每段要|默认|目标是?)\s*$")
"""What may stand right before a typed figure: a target or a bound is a setting, not a measurement."""


def _prose(page: str) -> list[tuple[int, str]]:
    """The lines of a page a person typed: outside code fences, not an include."""
    lines, fenced = [], False
    for number, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and "--8<--" not in line:
            lines.append((number, line))
    return lines


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_type_no_measured_figure_of_their_own(page: str) -> None:
    typed = [f"{page}:{n}: {m.group(0)!r} in {line.strip()[:80]}" for n, line in _prose(page)
             for m in _FIGURE.finditer(line) if not _BOUND.search(line[max(0, m.start() - 8):m.start()])]
    assert not typed, "这些数字是手打的，应当来自 sim/eval/ 的快照：\n" + "\n".join(typed)
