"""The drift gate (``check``) and the review view of a change (``diff``).

Invariant: neither command writes into the repository. Both regenerate the scripted
artifacts into a temporary folder and compare: ``check`` against the committed files in
``sim/`` (any difference fails; an imported scenario is also compared with a fresh import
of its file in ``sim/imports/``), ``diff`` against the artifacts as they were at a git ref,
reported per scenario step and per model call so a prompt change reads as a prompt diff.
``check`` also runs the template coverage gate (:mod:`harness.running.coverage`): every template
and every branch of it must be rendered into some artifact, else a change there would
pass unseen.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liyuan.errors import ConfigError
from liyuan.prompts import observe_renders

from ..importer import import_drift
from .artifacts import FileDiff, canonical_json, compare_trees, unified
from .coverage import CoverageReport, CoverageTracker, coverage_report
from .models import open_setup
from .progress import Progress
from .runner import run_scenarios
from .state import RunReport

__all__ = ["CheckResult", "Regenerated", "check", "check_run", "diff_against", "diff_run", "regenerate"]


@dataclass
class Regenerated:
    """A scripted run held in memory: its report, its files and what it rendered."""

    report: RunReport
    files: dict[str, bytes]
    tracker: CoverageTracker

    def coverage(self) -> CoverageReport:
        """Template coverage of this run's artifacts."""
        return coverage_report(self.tracker.events, self.report.records, self.files)


def regenerate(root: Path, progress: Progress | None = None) -> Regenerated:
    """Run every scenario with scripted replies, in memory, tracing every template render."""
    tracker = CoverageTracker()
    with open_setup("scripted", root) as setup, observe_renders(tracker.observe):
        report = run_scenarios(None, root=root, setup=setup, progress=progress or Progress(quiet=True),
                               write=False, on_step=tracker.begin_step)
    return Regenerated(report, dict(report.artifacts.files), tracker)


@dataclass
class CheckResult:
    """Outcome of :func:`check`."""

    diffs: list[FileDiff]
    failures: list[str]
    files: int
    coverage: CoverageReport | None = None

    @property
    def ok(self) -> bool:
        """True when the committed artifacts match a fresh run, no step failed and coverage is complete."""
        return not self.diffs and not self.failures and (self.coverage is None or self.coverage.ok)

    def report(self) -> str:
        """Human-readable result (Chinese), with a unified diff per differing file."""
        covered = f"{self.coverage.summary()}\n" if self.coverage is not None else ""
        if self.ok:
            return f"sim/ 与代码一致：{self.files} 个文件逐字节相同。\n{covered}"
        lines = []
        for failure in self.failures:
            lines.append(f"步骤失败：{failure}\n")
        gaps = self.coverage.gaps if self.coverage is not None else []
        if gaps:
            lines.append(f"模版覆盖不全：{len(gaps)} 处改了也不会在 sim/ 里留下差异\n")
            lines.extend(f"✗ {gap}\n" for gap in gaps)
            lines.append("在 sim/scenarios/*.yaml 里加一个走到这一支的步骤（note 写明为什么有这一步），"
                         "再运行 `python -m harness run` 重新生成。\n")
        labels = {"changed": "内容不同", "new": "没有提交", "missing": "已提交但不再生成"}
        for d in self.diffs:
            lines.append(f"\n✗ sim/{d.path}（{labels.get(d.status, d.status)}）\n{d.diff}")
        if self.diffs:
            lines.append(f"\n{len(self.diffs)} 个文件和代码对不上。改了代码或 prompt 之后运行 "
                         "`python -m harness run` 重新生成，审阅 `python -m harness diff` 的输出后一并提交。\n")
        lines.append(covered)
        return "".join(lines)


def _readable(root: Path, diff: FileDiff, fresh: Mapping[str, bytes]) -> FileDiff:
    """A changed ``out/*.json`` shown as ``diff`` shows it: per step and call, prompts as text.

    Each prompt is one JSON string, so a one-line prompt edit would otherwise be a diff
    of the whole record; other files (and a record that does not parse) keep their diff.
    """
    if diff.status != "changed" or not (diff.path.startswith("out/") and diff.path.endswith(".json")):
        return diff
    try:
        old = json.loads((root / "sim" / diff.path).read_text(encoding="utf-8"))
        new = json.loads(fresh[diff.path].decode("utf-8"))
        steps = _step_diffs(diff.path, "已提交", old, new)
        rest_old = {k: v for k, v in old.items() if k != "steps"}
        rest_new = {k: v for k, v in new.items() if k != "steps"}
    except (OSError, ValueError, KeyError, AttributeError):
        return diff
    head = unified(canonical_json(rest_old), canonical_json(rest_new), "已提交 · 顶层字段", "重新生成 · 顶层字段")
    parts = ([f"## 顶层字段\n{head}"] if head else []) + steps
    return FileDiff(diff.path, diff.status, "\n".join(parts)) if parts else diff


def check_run(root: Path, run: Regenerated) -> CheckResult:
    """Compare a regenerated run with the committed ``sim/out`` and ``sim/txt``; add its coverage."""
    found = compare_trees(root / "sim", run.files, orphan_dirs=("txt", "turns"))
    diffs = [_readable(root, d, run.files) for d in found]
    return CheckResult(diffs=diffs, failures=run.report.failures, files=len(run.files), coverage=run.coverage())


def check(root: Path, progress: Progress | None = None) -> CheckResult:
    """Regenerate in memory and compare with the committed ``sim/out`` and ``sim/txt``.

    Imported scenarios are also compared with a fresh import of their file in ``sim/imports``.
    """
    result = check_run(root, regenerate(root, progress))
    result.diffs.extend(import_drift(root))
    return result


def _git_show(root: Path, ref: str, rel: str) -> str | None:
    result = subprocess.run(["git", "-C", str(root), "show", f"{ref}:{rel}"],
                            capture_output=True, check=False)
    return result.stdout.decode("utf-8") if result.returncode == 0 else None


def _verify_ref(root: Path, ref: str) -> None:
    result = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                            capture_output=True, check=False)
    if result.returncode != 0:
        raise ConfigError(f"不认识的 git 引用：{ref}（在 {root} 里）")


def _calls(step: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c["key"]: c for c in step.get("calls", [])}


def _call_parts(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(label, old text, new text) for the prompt parts and the reply of one call."""

    def request(call: Mapping[str, Any], part: str) -> str:
        return str((call.get("request") or {}).get(part, ""))

    def reply(call: Mapping[str, Any]) -> str:
        return str((call.get("reply") or {}).get("text", ""))

    return [("prompt · system", request(a, "system"), request(b, "system")),
            ("prompt · user", request(a, "user"), request(b, "user")),
            ("回复", reply(a), reply(b))]


def _step_diffs(rel: str, ref: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Per step and per call: the parts that differ, as unified diffs."""
    out: list[str] = []
    old_steps = {s["id"]: s for s in old.get("steps", [])}
    new_steps = {s["id"]: s for s in new.get("steps", [])}
    scenario = new.get("scenario") or old.get("scenario")
    for step_id in list(new_steps) + [s for s in old_steps if s not in new_steps]:
        a, b = old_steps.get(step_id, {}), new_steps.get(step_id, {})
        kind = b.get("kind") or a.get("kind")
        parts: list[str] = []
        old_calls, new_calls = _calls(a), _calls(b)
        for key in list(new_calls) + [k for k in old_calls if k not in new_calls]:
            ca, cb = old_calls.get(key, {}), new_calls.get(key, {})
            for label, old_part, new_part in _call_parts(ca, cb):
                text = unified(old_part, new_part, f"{ref}:sim/{rel} · {key} · {label}",
                               f"工作区 · {key} · {label}")
                if text:
                    parts.append(f"### 调用 {key} 的{label}\n{text}")
        for label in ("outcome", "activity"):
            old_text, new_text = canonical_json(a.get(label)), canonical_json(b.get(label))
            text = unified(old_text, new_text, f"{ref} · {step_id} · {label}", f"工作区 · {step_id} · {label}")
            if text:
                parts.append(f"### 结果 {label}\n{text}")
        if parts:
            state = "（新步骤）" if not a else "（已删除的步骤）" if not b else ""
            out.append(f"## {scenario} · 步骤 {step_id}（{kind}）{state}\n" + "".join(parts))
    return out


def diff_against(root: Path, ref: str = "HEAD", progress: Progress | None = None) -> tuple[str, int]:
    """Compare freshly generated artifacts with those committed at ``ref``.

    Returns:
        The review text and the number of differing prompts/outputs/files.

    Raises:
        ConfigError: ``ref`` is not a commit of the repository at ``root``.
    """
    _verify_ref(root, ref)
    return diff_run(root, ref, regenerate(root, progress))


def diff_run(root: Path, ref: str, run: Regenerated) -> tuple[str, int]:
    """:func:`diff_against` for a run already regenerated (``ref`` must be verified)."""
    report, fresh = run.report, run.files
    sections: list[str] = []
    writers: dict[str, str] = {}
    for records in report.records.values():
        for step in records:
            for rel in step.get("files", []):
                writers[rel] = step["id"]
    for rel in sorted(r for r in fresh if r.startswith("out/") and r.endswith(".json")):
        new = json.loads(fresh[rel].decode("utf-8"))
        old_text = _git_show(root, ref, f"sim/{rel}")
        old = json.loads(old_text) if old_text else {}
        sections.extend(_step_diffs(rel, ref, old, new))
    file_sections = []
    for rel in sorted(r for r in fresh if r.startswith("txt/")):
        new_text = fresh[rel].decode("utf-8")
        old_text = _git_show(root, ref, f"sim/{rel}") or ""
        text = unified(old_text, new_text, f"{ref}:sim/{rel}", f"工作区:sim/{rel}")
        if text:
            file_sections.append(f"## sim/{rel}（步骤 {writers.get(rel, '?')} 写的文件）\n{text}")
    count = len(sections) + len(file_sections)
    if not count:
        return f"和 {ref} 相比，所有 prompt 和产物都没有变化。\n", 0
    head = f"# 和 {ref} 相比：{len(sections)} 个步骤、{len(file_sections)} 个文件有变化\n\n"
    return head + "\n".join(sections + file_sections), count
