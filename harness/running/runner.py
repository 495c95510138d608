"""Run scenarios on the real liyuan code and collect their artifacts.

Invariant: a run is a pure function of (scenario files, reply files, liyuan code) when
the model is scripted: ids come from counters, time from a fixed clock, card memory
lives in a private temporary folder, and every artifact records only relative, stable
content. Nothing is written until every scenario has run; then all files are written
under the output base (``sim/`` for scripted runs, ``sim/runs/<model>/`` otherwise).

Layout under the output base: ``out/<name>.json`` (every step: prompts, replies,
outcomes, provenance), ``turns/<scenario>.json`` (the record of every turn the chats
assembled: blocks, sizes, sources, budget cuts) and ``txt/<file>`` (the files the steps
name); a model run also
gets ``replies/<scenario>.yaml`` (the recording, with request hashes), ``run.json``
and ``README.md``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from liyuan.clock import fixed_clock
from liyuan.errors import LiyuanError
from liyuan.storage import CardStorage

from .. import steps as step_handlers  # noqa: F401  (registers the step handlers)
from .artifacts import ArtifactSet
from .models import ModelSetup
from .progress import Progress
from .recorder import Recorder
from .runfolder import finish_run, work_base
from .scenario import Scenario, ScenarioError, load_scenario, scenario_names
from .state import DEFAULT_CLOCK_START, HANDLERS, RunReport, ScenarioRun, StepResult

__all__ = ["run_scenarios"]


StorageFor = Callable[[str], CardStorage | None]
"""Where a scenario's card keeps its state, by scenario name (:class:`liyuan.CardStorage`);
``None`` for the card folder."""
StepListener = Callable[[str, str], None]
"""Told ``(out name, step id)`` before each step runs (the template coverage tracker)."""


def _run_one(scenario: Scenario, setup: ModelSetup, artifacts: ArtifactSet, progress: Progress,
             root: Path, on_step: StepListener | None = None,
             storage: StorageFor | None = None) -> tuple[dict[str, list[dict[str, Any]]], list[str], Recorder]:
    recorder = Recorder(setup.backend_for(scenario, root), on_call=progress.call)
    records: dict[str, list[dict[str, Any]]] = {}
    failures: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix=f"liyuan-sim-{scenario.name}-", dir=work_base()))
    run: ScenarioRun | None = None
    try:
        run = ScenarioRun(scenario=scenario, recorder=recorder, setup=setup, workdir=workdir,
                          artifacts=artifacts, progress=progress, clock=fixed_clock(DEFAULT_CLOCK_START),
                          config=scenario.memory_config, root=root,
                          storage=storage(scenario.name) if storage is not None else None)
        label = "占位回复（导入的聊天，不是模型输出）" if setup.kind == "scripted" and scenario.source else setup.label
        progress.scenario(scenario.name, len(scenario.steps), label)
        for index, step in enumerate(scenario.steps, start=1):
            progress.step(index, len(scenario.steps), step.id, step.kind)
            recorder.begin_step(step.id)
            if on_step is not None:
                on_step(step.out, step.id)
            run.current = step
            run.activity = []
            run.events = []
            try:
                result = HANDLERS[step.kind](run, step)
            except LiyuanError as exc:
                result = StepResult({"error": str(exc)}, f"出错：{exc}", failed=True)
            missing = [name for name in step.files.values() if f"txt/{name}" not in run.written.get(step.id, [])]
            if missing and recorder.fatal is None:
                # A step that declares files it did not write did not do what the scenario says.
                note = f"声明要写却没有写出：{'、'.join(missing)}"
                result = StepResult(result.outcome, f"{result.summary}；{note}", failed=True)
            if recorder.fatal is not None:
                failures.append(f"{scenario.name} · {step.id}: {recorder.fatal}")
                progress.step_done("中止：回复缺失或过期")
                break
            if result.failed and not setup.tolerate_failures:
                failures.append(f"{scenario.name} · {step.id}: {result.summary}")
            progress.step_done(result.summary)
            records.setdefault(step.out, []).append({
                "id": step.id,
                "kind": step.kind,
                "note": step.note,
                "params": dict(step.params),
                "calls": [c.to_json(stable=setup.stable) for c in recorder.step_calls(step.id)],
                "activity": list(run.activity),
                "outcome": result.outcome,
                "summary": result.summary,
                "failed": result.failed,
                "files": run.written.get(step.id, []),
            })
        if run.turns:
            artifacts.add_json(f"turns/{scenario.name}.json", {
                "scenario": scenario.name,
                "note": "每一轮组装出的上下文的记录（liyuan.context.record.TurnRecord）：逐块的字数、估算 token、"
                        "来源，以及预算截掉或整段不送了什么、为什么。只有尺寸和来源，没有正文。",
                "turns": run.turns,
            })
    finally:
        if run is not None:
            run.card.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return records, failures, recorder


def run_scenarios(
    names: Sequence[str] | None,
    *,
    root: Path,
    setup: ModelSetup,
    out_base: Path | None = None,
    progress: Progress | None = None,
    write: bool = True,
    on_step: StepListener | None = None,
    concurrency: int = 1,
    storage: StorageFor | None = None,
) -> RunReport:
    """Run scenarios and write their artifacts.

    Args:
        names: Scenario names (``sim/scenarios/<name>.yaml``); ``None`` or empty runs all.
        root: The repository root.
        setup: Which model answers and how the run is labelled (:mod:`harness.running.models`).
        out_base: Where ``out/`` and ``txt/`` go; default from ``setup``.
        progress: Progress reporter (default: stderr).
        write: Write the files (``False`` keeps them in the report only).
        on_step: Called with ``(out name, step id)`` before each step.
        concurrency: How many scenarios run at once (their calls overlap; for endpoints
            that allow parallel requests). The artifacts are byte-identical to a
            sequential run; only the progress lines interleave. Steps within one
            scenario always run in order. Not combined with ``on_step``.
        storage: Where each scenario's card keeps its sessions, memory documents and
            vector memory, by scenario name (default: the card folder); the artifacts
            must not depend on it.

    Raises:
        ScenarioError: A scenario or reply file is malformed, or a name is unknown.
    """
    progress = progress or Progress()
    folder = root / "sim" / "scenarios"
    available = scenario_names(folder)
    chosen = list(names) if names else available
    if not available:
        raise ScenarioError(f"{folder} 里还没有场景（*.yaml）："
                            "先写一个，或用 python -m harness import 导入一份聊天记录")
    for name in chosen:
        if name not in available:
            raise ScenarioError(f"没有这个场景：{name}（可选：{'、'.join(available)}）")
    scenarios = [load_scenario(folder / f"{n}.yaml", root) for n in chosen]
    base = out_base if out_base is not None else root / setup.out_rel
    artifacts = ArtifactSet(secrets=setup.secrets)
    report = RunReport(artifacts=artifacts, out_base=base)
    outputs: dict[str, list[dict[str, Any]]] = {}
    owners: dict[str, str] = {}
    if concurrency < 1 or (concurrency > 1 and on_step is not None):
        raise ScenarioError(f"并发数应为正整数，且不能和逐步监听一起用：{concurrency}")

    def one(scenario: Scenario) -> tuple[ArtifactSet, dict[str, list[dict[str, Any]]], list[str], Recorder]:
        own = ArtifactSet(secrets=setup.secrets)
        return (own, *_run_one(scenario, setup, own, progress, root, on_step, storage))

    if concurrency > 1:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="harness-scenario") as pool:
            results: Iterable[tuple[ArtifactSet, dict[str, list[dict[str, Any]]], list[str], Recorder]] = \
                list(pool.map(one, scenarios))
    else:
        results = map(one, scenarios)  # lazily: one scenario after the other
    for scenario, (own, records, failures, recorder) in zip(scenarios, results, strict=True):
        files_before = len(artifacts)
        artifacts.absorb(own)
        report.failures.extend(failures)
        report.calls += len(recorder.calls)
        report.failed_calls.extend(f"{scenario.name} · {c.key}: {c.error}" for c in recorder.calls
                                   if c.error is not None)
        for out_name, steps in records.items():
            if out_name in owners and owners[out_name] != scenario.name:
                raise ScenarioError(f"sim/out/{out_name}.json 同时由 {owners[out_name]} 和 {scenario.name} 写")
            owners[out_name] = scenario.name
            outputs.setdefault(out_name, []).extend(steps)
        setup.after_scenario(scenario, recorder, artifacts)
        progress.scenario_done(len(artifacts) - files_before)
    for out_name, steps in outputs.items():
        scenario = next(s for s in scenarios if s.name == owners[out_name])
        artifacts.add_json(f"out/{out_name}.json", {
            "scenario": scenario.name,
            "source": scenario.path,
            "title": scenario.title,
            "description": scenario.description,
            "card": scenario.card,
            "user": scenario.user,
            "char": scenario.char,
            "language": scenario.language,
            "config": dict(scenario.config),
            "model": setup.describe(scenario),
            "steps": steps,
        })
    report.records = outputs
    if report.calls and len(report.failed_calls) == report.calls and not report.failures:
        # Nothing was answered: whatever the steps made of it, the run did not test the model
        # (a run already failed for another reason, e.g. a stale recording, says so instead).
        report.failures.append(f"模型调用全部失败（{report.calls} 次），见上面列出的调用")
    finish_run(setup, report)
    # A failed scripted run must not overwrite the committed artifacts with half a run, and a
    # model run in which no call was answered leaves no run folder (模型对比 would list it as a
    # recording); an explicit --out (check, diff, a look at the failure) and other model runs write.
    unanswered = bool(report.calls) and len(report.failed_calls) == report.calls
    report.written = write and not (out_base is None and (
        (report.failures and setup.kind == "scripted") or (unanswered and setup.kind != "scripted")))
    if report.written:
        for stale in _stale_files(base, {s.name for s in scenarios}, artifacts):
            stale.unlink()
        artifacts.write(base)
    return report


def _stale_files(base: Path, scenarios: set[str], artifacts: ArtifactSet) -> list[Path]:
    """Files an earlier run of these scenarios wrote under ``base`` that this run does not.

    A step that wrote ``txt/recap-A.txt`` last time may write nothing now (the reply was
    refused); leaving the old file would show output this run did not produce. Only
    files listed by these scenarios' own earlier records are touched, so a partial run
    (one scenario of several) never removes another scenario's files.
    """
    stale: list[Path] = []
    for record_path in sorted((base / "out").glob("*.json")):
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("scenario") not in scenarios:
            continue
        listed = {f"out/{record_path.name}"}
        for step in record.get("steps") or []:
            if isinstance(step, dict):
                listed.update(f for f in step.get("files") or [] if isinstance(f, str))
        for rel in sorted(listed):
            target = base / rel
            inside = target.resolve().is_relative_to(base.resolve())
            if rel not in artifacts.files and inside and target.is_file():
                stale.append(target)
    return stale
