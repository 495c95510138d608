"""The overhead bench times the library as the app calls it, and that path reads only the live part.

No test here times anything: speed lives in ``python -m harness eval bench``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest.mock import patch

from harness.bench.overhead import overhead_table, percentile, play, turn_work, wall_times
from harness.bench.stamp import stamp
from harness.eval.report import bench_markdown
from liyuan.session.entries import Entry
from liyuan.session.state import Ledger
from liyuan.story.history import active_summary
from liyuan.story.view import live_start

from ..liyuan.branches import Recording


def _played(turns: int) -> tuple[list[tuple[object, ...]], int]:
    sent: list[tuple[object, ...]] = []
    summaries = 0
    for chat, turn in play(turns, background=False):
        prepared = turn_work(chat, turn)
        sent.append((prepared.messages, prepared.record))
        summaries += active_summary(chat.branch()) is not None
    return sent, summaries


def test_the_timed_path_computes_what_the_whole_branch_gives() -> None:
    fast, summaries = _played(160)
    with patch("liyuan.story.history.live_start", lambda _branch, _skip=(): 0):  # read the whole branch
        whole, _ = _played(160)
    assert len(fast) == 160
    assert fast == whole
    assert summaries > 100  # the comparison ran across compactions, not only before the first


def test_the_timed_path_reads_only_the_live_part_as_the_chat_grows() -> None:
    reach = []
    for chat, turn in play(400, background=False):
        original = chat.tree.branch
        seen: list[Recording] = []

        def recording(original: Callable[[], Sequence[Entry]] = original, seen: list[Recording] = seen) -> Recording:
            seen.append(Recording(original()))
            return seen[-1]

        with patch.object(chat.tree, "branch", recording):
            chat.prepare(turn.user)  # the turn's reads (the reply's compaction check is the library's own)
        chat.record(turn.reply, ledger=Ledger.from_dict(turn.ledger))
        if turn.number > 40:  # after the first compaction
            branch = seen[-1]
            assert branch.lowest == live_start(branch.items) > 0, turn.number
            reach.append(len(branch) - branch.lowest)
    assert max(reach) < 40 * 3 + 2  # at most ~37 turns of three entries, plus the summary
    assert max(reach[-100:]) == max(reach[:100])  # the part read does not grow with the chat


def test_overhead_table_reports_the_library_and_a_verdict_only_with_both_sizes() -> None:
    table = overhead_table(sizes=(100, 200), sample=5)
    assert [(r["variant"], r["turns"], r["samples"]) for r in table["rows"]] == [("library", 100, 5),
                                                                               ("library", 200, 5)]
    assert all(r["median_ms"] > 0 and r["p95_ms"] >= r["median_ms"] for r in table["rows"])
    assert table["verdicts"] == {}  # no 10,000-turn row, so no verdict is claimed


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([7.0], 95) == 7.0


def test_the_stamp_names_the_commit_the_machine_the_time_and_the_load() -> None:
    root = Path(__file__).resolve().parents[2]
    info = stamp(root)
    assert info["cores"] and info["python"] and info["cpu"]
    assert info["measured_at"].endswith("UTC")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    assert head.stdout.startswith(info["commit"]) and len(info["commit"]) == 12
    assert info["load_start"] is None or info["load_start"] >= 0


def test_wall_time_of_harness_run_succeeds_and_writes_outside_the_repo() -> None:
    root = Path(__file__).resolve().parents[2]
    before = sorted(p.name for p in (root / "sim" / "out").iterdir())
    table = wall_times(root, repeat=1, commands=("harness run",))
    row = table["rows"][0]
    assert row["failures"] == [] and row["best"] is not None
    assert row["command"] == "python -m harness run -q --out <临时目录>/sim"
    assert sorted(p.name for p in (root / "sim" / "out").iterdir()) == before


def test_bench_markdown_states_machine_verdict_and_failures() -> None:
    bench = {
        "machine": {"measured_at": "2026-12-02 10:00 UTC", "cpu": "CPU", "cores": 2, "python": "3.11.7",
                    "system": "Linux"},
        "overhead": {"sample_turns": 5, "target": "目标", "rows": [
            {"variant": "library", "turns": 100, "median_ms": 0.5, "p95_ms": 0.9}],
            "verdicts": {"library": {"median_10000_ms": 100.0, "ratio_to_100": 200.0, "meets_target": False}}},
        "wall_times": {"repeat": 1, "rows": [{"name": "harness run", "command": "python -m harness run",
                                              "seconds": [1.0], "best": None, "failures": [["出错了"]]}]},
    }
    text = bench_markdown(bench)
    assert "CPU（2 核）" in text and "2026-12-02 10:00 UTC" in text
    assert "| 本库（分支有缓存，只读活跃区间） | 100 | 0.500 | 0.900 |" in text
    assert ("本库（分支有缓存，只读活跃区间）：10,000 轮中位数 100.000 ms，"
            "是 100 轮的 200.00 倍，没达到目标（目标）") in text
    assert "| `python -m harness run` | 失败 | 1.00 |" in text and "出错了" in text
