"""SyncWorker: background runs, one at a time per card, triggers during a run collapse into one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from liyuan.card import CardMemory, SyncOutcome
from liyuan.card.worker import SyncWorker
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import HANDBOOK_2, RECAP_A, RECAP_B, RESIDENT_2, memory, merge_reply, two_chats, user_text


def test_one_trigger_one_run(tmp_path: Path) -> None:
    two_chats(tmp_path)
    model = FunctionModel(lambda r: (RECAP_A if "初来乍到" in user_text(r) else RECAP_B)
                          if r.purpose == "recap" else merge_reply())
    outcomes: list[tuple[Path, SyncOutcome]] = []
    worker = SyncWorker(lambda card: memory(card, model), on_outcome=lambda c, o: outcomes.append((c, o)))
    worker.trigger(tmp_path)
    assert worker.wait_idle(10)
    assert worker.runs == 1
    assert [(c, o.recapped, o.merged) for c, o in outcomes] == [(tmp_path.resolve(), ["A", "B"], "ok")]


def test_triggers_during_a_run_queue_exactly_one_more(tmp_path: Path) -> None:
    two_chats(tmp_path)
    entered, release = threading.Event(), threading.Event()
    active = 0
    overlap: list[int] = []
    lock = threading.Lock()

    def fn(request: ModelRequest) -> str:
        nonlocal active
        with lock:
            active += 1
            overlap.append(active)
        entered.set()
        release.wait(10)
        with lock:
            active -= 1
        if request.purpose == "recap":
            return RECAP_A if "初来乍到" in user_text(request) else RECAP_B
        return merge_reply()

    model = FunctionModel(fn)
    worker = SyncWorker(lambda card: memory(card, model))
    worker.trigger(tmp_path)
    assert entered.wait(10)
    for _ in range(5):
        worker.trigger(tmp_path)
        worker.trigger(str(tmp_path / "."))
    release.set()
    assert worker.wait_idle(10)
    assert worker.runs == 2  # the first run and exactly one queued run
    assert max(overlap) == 1  # never two model calls of the card at once
    assert [c.purpose for c in model.calls] == ["recap", "recap", "merge"]  # the second run found nothing


def test_cards_run_independently(tmp_path: Path) -> None:
    for card in ("c1", "c2"):
        two_chats(tmp_path / card)
    model = FunctionModel(lambda r: (RECAP_A if "初来乍到" in user_text(r) else RECAP_B)
                          if r.purpose == "recap" else merge_reply())
    worker = SyncWorker(lambda card: memory(card, model))
    worker.trigger(tmp_path / "c1")
    worker.trigger(tmp_path / "c2")
    assert worker.wait_idle(10)
    assert worker.runs == 2 and len(model.calls) == 6
    assert (tmp_path / "c1" / "记忆" / "常驻摘要.md").exists() and (tmp_path / "c2" / "记忆" / "常驻摘要.md").exists()


def test_no_model_configured_skips_silently(tmp_path: Path) -> None:
    two_chats(tmp_path)
    worker = SyncWorker(lambda card: None)
    worker.trigger(tmp_path)
    assert worker.wait_idle(10)
    assert worker.runs == 1 and not (tmp_path / "记忆").exists()
    assert worker.delete_chat(tmp_path, "A") is False and (tmp_path / "对话" / "A").exists()


def test_a_failing_run_is_reported_and_the_worker_goes_on(tmp_path: Path) -> None:
    two_chats(tmp_path)
    errors: list[BaseException] = []
    calls = 0

    def factory(card: Path) -> CardMemory:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("配置读不出来")
        return memory(card, ScriptedModel({"recap": [RECAP_A, RECAP_B], "merge": [merge_reply()]}))

    worker = SyncWorker(factory, on_error=lambda c, e: errors.append(e))
    worker.trigger(tmp_path)
    assert worker.wait_idle(10)
    assert [str(e) for e in errors] == ["配置读不出来"]
    worker.trigger(tmp_path)
    assert worker.wait_idle(10)
    assert worker.runs == 2 and (tmp_path / "记忆" / "常驻摘要.md").exists()


def test_delete_chat_triggers_the_forgetting_sync(tmp_path: Path) -> None:
    two_chats(tmp_path)
    # The forgetting merge's reply drops chat B (check_merge refuses one that keeps it).
    replies = {"recap": [RECAP_A, RECAP_B], "merge": [merge_reply(), merge_reply(HANDBOOK_2, RESIDENT_2)]}
    model = ScriptedModel(replies)
    outcomes: list[SyncOutcome] = []
    worker = SyncWorker(lambda card: memory(card, model), on_outcome=lambda c, o: outcomes.append(o))
    worker.trigger(tmp_path)
    assert worker.wait_idle(10)
    assert worker.delete_chat(tmp_path, "B") is True
    assert worker.wait_idle(10)
    assert outcomes[-1].forgotten == ["B"]
    assert "<deleted-chats>\n- 局/B.md\n</deleted-chats>" in user_text(model.calls[-1])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_sync_that_ends_its_thread_does_not_leave_waiters_hanging(tmp_path: Path) -> None:
    two_chats(tmp_path)

    def leave(_request: ModelRequest) -> str:
        raise SystemExit("模型调用了 sys.exit")  # not an Exception: nothing on the way catches it

    worker = SyncWorker(lambda card: memory(card, FunctionModel(leave)))
    worker.trigger(tmp_path)
    assert worker.wait_idle(5)  # the card is no longer marked running
    worker.trigger(tmp_path)  # and a later trigger starts a fresh run
    assert worker.wait_idle(5)
    for thread in threading.enumerate():  # their SystemExit is reported within this test
        if thread.name.startswith("card-sync-"):
            thread.join(5)


def test_a_listener_that_raises_does_not_end_the_worker(tmp_path: Path) -> None:
    two_chats(tmp_path)
    model = ScriptedModel({"recap": [RECAP_A, RECAP_B], "merge": [merge_reply()]})

    def broken(_card: Path, _outcome: SyncOutcome) -> None:
        raise RuntimeError("监听方自己出错")

    worker = SyncWorker(lambda card: memory(card, model), on_outcome=broken)
    worker.trigger(tmp_path)
    assert worker.wait_idle(5)
    worker.trigger(tmp_path)
    assert worker.wait_idle(5)
    assert worker.runs == 2
