"""The overhead bench: the incremental prototype computes exactly what the library does.

No test here times anything: speed lives in ``python -m harness eval bench``.
"""

from __future__ import annotations

from pathlib import Path

from harness.eval.overhead import beat_work, machine_info, overhead_table, percentile, play, wall_times
from harness.eval.report import bench_markdown


def test_the_live_slice_gives_the_same_context_and_plan_as_the_whole_branch() -> None:
    compared = 0
    summaries = 0
    for state, beat, names in play(160):
        full_messages, full_plan = beat_work(state.tree.branch(), beat.user, names)
        slice_messages, slice_plan = beat_work(state.live_slice(), beat.user, names)
        assert slice_messages == full_messages, beat.number
        assert (full_plan is None) == (slice_plan is None)
        if full_plan is not None and slice_plan is not None:
            assert slice_plan.covers_through_id == full_plan.covers_through_id
            assert slice_plan.conversation_text == full_plan.conversation_text
            assert slice_plan.previous_summary == full_plan.previous_summary
            assert slice_plan.turns == full_plan.turns
        summaries += state.summary is not None
        compared += 1
    assert compared == 160
    assert summaries > 0  # the comparison ran across compactions, not only before the first


def test_the_live_slice_stays_short_as_the_chat_grows() -> None:
    lengths = [len(state.live_slice()) for state, _beat, _names in play(400)]
    assert max(lengths[200:]) < 40 * 3 + 2  # at most ~36 beats of three entries, plus the summary


def test_overhead_table_reports_both_variants_and_a_verdict() -> None:
    table = overhead_table(sizes=(100, 200), sample=5)
    assert [(r["variant"], r["beats"], r["samples"]) for r in table["rows"]] == [
        ("current", 100, 5), ("current", 200, 5), ("incremental", 100, 5), ("incremental", 200, 5)]
    assert all(r["median_ms"] > 0 and r["p95_ms"] >= r["median_ms"] for r in table["rows"])
    assert table["verdicts"] == {}  # no 10,000-beat row, so no verdict is claimed


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([7.0], 95) == 7.0


def test_machine_info_names_the_machine_and_the_time() -> None:
    info = machine_info()
    assert info["cores"] and info["python"] and info["cpu"]
    assert info["measured_at"].endswith("UTC")


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
        "overhead": {"sample_beats": 5, "target": "目标", "rows": [
            {"variant": "current", "beats": 100, "median_ms": 0.5, "p95_ms": 0.9}],
            "verdicts": {"current": {"median_10000_ms": 100.0, "ratio_to_100": 200.0, "meets_target": False}}},
        "wall_times": {"repeat": 1, "rows": [{"name": "harness run", "command": "python -m harness run",
                                              "seconds": [1.0], "best": None, "failures": [["出错了"]]}]},
    }
    text = bench_markdown(bench)
    assert "CPU（2 核）" in text and "2026-12-02 10:00 UTC" in text
    assert "没达到目标" in text
    assert "| `python -m harness run` | 失败 | 1.00 |" in text and "出错了" in text
