"""The one background runner (issue 21, item 6): bounded waits, one timed-out value, ordered jobs.

Jobs that must not finish yet wait on an event the test releases, so nothing here
depends on how fast the machine is; every wait has a generous bound so a bug fails the
test instead of hanging it.
"""

from __future__ import annotations

import ast
import gc
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from liyuan.app.activity import Activity, Lane
from liyuan.endpoint import within
from liyuan.runner import REFUSED, TIMED_OUT, Deadline, Job, NoResult, Runner, detached
from liyuan.vector.worker import worker_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Held jobs wait on it; released at the end of every test so no thread outlives it."""
    event = threading.Event()
    yield event
    event.set()


def held(gate: threading.Event, started: threading.Event | None = None) -> Callable[[], str]:
    def call() -> str:
        if started is not None:
            started.set()
        assert gate.wait(10)
        return "held"

    return call


class Store:
    """Stands for a chunk store: its worker is found by the object."""


def thread_named(name: str) -> threading.Thread | None:
    return next((t for t in threading.enumerate() if t.name == name), None)


def test_a_wait_that_runs_out_returns_the_one_timed_out_value(gate: threading.Event) -> None:
    runner = Runner("test-timeout")
    assert runner.run(held(gate), 0.05) is TIMED_OUT
    assert within(0.05, held(gate)) is TIMED_OUT
    store = Store()
    assert worker_for(store).run(held(gate), 0.05) is TIMED_OUT
    assert detached("test-detached", held(gate)).wait(0.05) is TIMED_OUT
    assert repr(TIMED_OUT) == "TIMED_OUT" and TIMED_OUT is NoResult.TIMED_OUT


def test_no_other_module_defines_a_timed_out_value_of_its_own() -> None:
    defined = []
    for path in sorted((ROOT / "liyuan").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            classes = [node.name] if isinstance(node, ast.ClassDef) else []
            defined += [f"{path.relative_to(ROOT)}:{n}" for n in names + classes if "timed" in n.lower()]
    # The enum member, the module's name for it, its type: all in the runner.
    assert sorted(defined) == ["liyuan/runner.py:TIMED_OUT", "liyuan/runner.py:TIMED_OUT", "liyuan/runner.py:TimedOut"]


def test_an_exception_in_a_job_reaches_its_waiter_and_the_runner_goes_on() -> None:
    runner = Runner("test-errors")

    def leave() -> None:
        raise SystemExit("sys.exit in a job")

    failed = runner.run(lambda: 1 / 0, 10)
    assert isinstance(failed, ZeroDivisionError)  # returned, not raised
    assert isinstance(runner.run(leave, 10), SystemExit)  # not an Exception either: still handed over
    assert runner.run(lambda: 42, 10) == 42
    assert isinstance(within(10, leave), SystemExit) and isinstance(within(10, lambda: 1 / 0), ZeroDivisionError)


def test_the_error_of_a_job_nobody_waits_for_any_more_is_logged(
        gate: threading.Event, caplog: pytest.LogCaptureFixture) -> None:
    runner = Runner("test-lost")

    def fails_late() -> None:
        assert gate.wait(10)
        raise OSError("磁盘满了")

    with caplog.at_level(logging.WARNING, logger="liyuan.runner"):
        assert runner.run(fails_late, 0.05, keep=True) is TIMED_OUT
        gate.set()
        assert runner.close(10)  # the thread is joined: it has logged
    assert [r.getMessage() for r in caplog.records] == ["test-lost 的延后任务出错（OSError: 磁盘满了）"]


def test_a_job_its_waiter_gave_up_on_is_skipped_unless_kept(gate: threading.Event) -> None:
    runner = Runner("test-skip")
    ran: list[str] = []
    runner.submit(held(gate))
    assert runner.run(lambda: ran.append("skipped"), 0.05) is TIMED_OUT
    assert runner.run(lambda: ran.append("kept"), 0.05, keep=True) is TIMED_OUT
    gate.set()
    assert runner.wait(10)
    assert ran == ["kept"]


def test_an_urgent_job_goes_ahead_of_every_queued_job_that_is_not(gate: threading.Event) -> None:
    runner = Runner("test-urgent")
    order: list[str] = []
    started = threading.Event()
    runner.submit(held(gate, started))
    assert started.wait(10)
    for name in ("a", "b"):
        runner.submit(lambda name=name: order.append(name))  # type: ignore[misc]
    runner.submit(lambda: order.append("u1"), urgent=True)
    runner.submit(lambda: order.append("u2"), urgent=True)
    gate.set()
    assert runner.wait(10)  # waits for the job that ends last, not the newest urgent one
    assert order == ["u1", "u2", "a", "b"]


def test_a_bounded_queue_refuses_a_kept_job_beyond_its_bound(gate: threading.Event) -> None:
    runner = Runner("test-bound", max_kept=2)
    started = threading.Event()
    runner.submit(held(gate, started))
    assert started.wait(10)  # the running job does not count, the waiting ones do
    assert isinstance(runner.submit(lambda: None), Job)
    assert isinstance(runner.submit(lambda: None), Job)
    assert runner.submit(lambda: None) is REFUSED
    assert runner.run(lambda: None, 0.05, keep=True) is REFUSED
    assert isinstance(runner.submit(lambda: None, keep=False), Job)  # a job that may be skipped is not bounded


def test_coalescing_jobs_are_single_flight(gate: threading.Event) -> None:
    runner = Runner("test-coalesce")
    runs: list[int] = []
    started = threading.Event()

    def sync() -> None:
        runs.append(len(runs))
        started.set()
        assert gate.wait(10)

    first = runner.submit(sync, coalesce=True)
    assert started.wait(10)
    waiting = [runner.submit(sync, coalesce=True) for _ in range(5)]
    assert all(job is waiting[0] for job in waiting) and waiting[0] is not first
    gate.set()
    assert runner.wait(10)
    assert runs == [0, 1]  # the running one and exactly one more


def test_close_drains_the_queue_then_takes_no_more_and_the_thread_ends(gate: threading.Event) -> None:
    runner = Runner("test-close")
    done: list[int] = []
    started = threading.Event()
    runner.submit(held(gate, started))
    assert started.wait(10)
    for number in range(5):
        runner.submit(lambda number=number: done.append(number))  # type: ignore[misc]
    threading.Timer(0.05, gate.set).start()
    assert runner.close(10)
    assert done == [0, 1, 2, 3, 4]
    assert not runner.alive and thread_named("test-close") is None
    assert runner.submit(lambda: None) is REFUSED


def test_a_stuck_job_does_not_hold_close_beyond_its_timeout(gate: threading.Event) -> None:
    runner = Runner("test-stuck")
    started = threading.Event()
    stuck = runner.submit(held(gate, started))
    assert isinstance(stuck, Job) and started.wait(10)
    assert runner.close(0.05) is False  # returns (the job would hold it forever)
    assert not stuck.done() and runner.alive
    gate.set()
    assert stuck.wait(10) == "held"  # the stuck job still finishes, and the thread ends after it
    thread = thread_named("test-stuck")
    if thread is not None:
        thread.join(10)
    assert not runner.alive


def test_one_thread_at_a_time_ending_when_idle_and_started_again_by_the_next_job() -> None:
    runner = Runner("test-idle")
    names: set[str] = set()

    def note() -> None:
        names.add(threading.current_thread().name)

    for _ in range(3):
        assert runner.run(note, 10) is None
        thread = thread_named("test-idle")
        if thread is not None:
            thread.join(10)
        assert not runner.alive and runner.idle
    assert names == {"test-idle"}


def test_an_idle_worker_that_waits_for_work_ends_at_once_on_close() -> None:
    runner = Runner("test-linger", idle_s=600.0)
    assert runner.run(lambda: "x", 10) == "x"
    assert runner.alive  # waiting for a next job
    assert runner.close(10)
    assert not runner.alive  # joined: not after 600 s, now


def test_threads_are_daemons_unless_asked_and_a_lane_keeps_the_process_for_its_work(gate: threading.Event) -> None:
    daemon = Runner("test-daemon")
    daemon.submit(held(gate))
    lane = Lane("test-lane", lambda _a: None)

    def work() -> None:
        held(gate)()

    lane.submit(work)
    daemon_thread, lane_thread = thread_named("test-daemon"), thread_named("test-lane")
    assert daemon_thread is not None and daemon_thread.daemon
    assert lane_thread is not None and not lane_thread.daemon  # queued work is done before the process ends
    gate.set()
    assert lane.close(10) and daemon.close(10)


def test_a_lane_hands_a_system_exit_to_its_waiter_and_turns_errors_into_activities() -> None:
    seen: list[Activity] = []
    lane = Lane("test-lane-exit", seen.append, chat_id="jA")

    def leave() -> None:
        raise SystemExit("sys.exit in background work")

    lane.submit(leave)
    with pytest.raises(SystemExit):
        lane.wait(10)
    lane.submit(lambda: None)
    assert lane.wait(10) and seen == []
    lane.submit(lambda: [][0])
    assert lane.close(10)
    assert [a.kind for a in seen] == ["error"] and isinstance(lane.errors[0], IndexError)
    lane.submit(lambda: seen.append(Activity("compact", "inline", "jA")))  # closed: runs in the caller
    assert seen[-1].text == "inline"


def test_within_calls_abandon_on_time_out_and_ignores_its_errors(gate: threading.Event) -> None:
    abandoned: list[str] = []

    def abandon() -> None:
        abandoned.append("closed")
        gate.set()  # as closing the connection ends the worker's read
        raise OSError("already closed")

    assert within(0.05, held(gate), abandon) is TIMED_OUT
    assert abandoned == ["closed"]
    assert within(10, lambda: "ok", abandon) == "ok" and abandoned == ["closed"]


def test_a_deadline_shares_one_bound_between_waits() -> None:
    assert Deadline(None).left() is None
    assert Deadline(-5).left() == 0.0
    left = Deadline(3600).left()
    assert left is not None and 0 < left <= 3600


def failing(store: Store) -> Callable[[], None]:
    def fails() -> None:
        raise OSError(f"{store} 坏了")  # its traceback holds the store through this frame

    return fails


def test_a_store_worker_keeps_nothing_of_a_failed_job_so_the_store_can_go() -> None:
    store = Store()
    gone = weakref.ref(store)
    outcome = worker_for(store).run(failing(store), 10)
    assert isinstance(outcome, OSError)
    del outcome, store
    gc.collect()
    assert gone() is None  # the worker (alive, idle) and its entry let the store be collected


def test_close_says_true_when_every_job_finished_even_if_the_last_was_skipped(gate: threading.Event) -> None:
    # Issue 37, item 9: a skipped job's outcome is TIMED_OUT, which close() took for "the wait ran out".
    runner = Runner("test-skipped-last")
    runner.submit(held(gate))
    assert runner.run(lambda: None, 0.05) is TIMED_OUT  # not kept: skipped once the first job ends
    gate.set()
    assert runner.close(10) is True
    assert runner.wait(0) is True and runner.idle
