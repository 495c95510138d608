"""The README of a model run folder (``sim/runs/<model>/README.md``).

Invariant: the README is generated from the run's own records: it names the model, says
plainly whether the run is a plumbing run, and lists every step outcome (failures
included) so what the model did, and what the code did with it, is visible without
opening the JSON.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .models import ModelSetup
from .state import RunReport

__all__ = ["finish_run", "readme", "work_base"]


def work_base() -> str | None:
    """Where the private card folders go: RAM-backed when available.

    The session tree and the vector store fsync every write (their crash guarantees);
    on a scratch folder that is deleted after the run, that durability buys nothing and
    costs most of the run time on a busy disk.
    """
    configured = os.environ.get("LIYUAN_SIM_TMP")
    if configured:
        return configured
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _step_line(step: dict[str, Any]) -> str:
    calls = step.get("calls") or []
    usage = [c["reply"]["usage"] for c in calls if c.get("reply") and c["reply"].get("usage")]
    tokens = ""
    if usage:
        tokens = f"；tokens {sum(u['prompt_tokens'] for u in usage)}→{sum(u['completion_tokens'] for u in usage)}"
    outcome = step.get("outcome") or {}
    detail = ""
    if step.get("kind") == "compact":
        detail = f"（{outcome.get('kind')}/{outcome.get('reason') or '—'}）"
    elif step.get("kind") == "sync":
        changed = outcome.get("memory_files_changed") or []
        detail = f"（记忆文件变化：{'、'.join(changed) if changed else '没有'}）"
    mark = "✗ " if step.get("failed") else ""
    head = f"- {mark}`{step['id']}`（{step.get('kind')}，{len(calls)} 次调用{tokens}）"
    return f"{head}：{step.get('summary', '')}{detail}"


def _findings(records: dict[str, list[dict[str, Any]]]) -> list[str]:
    """What the code did with the model's output, step by step, from the outcomes."""
    rejected: list[str] = []
    landed: list[str] = []
    errors: list[str] = []
    for _name, steps in sorted(records.items()):
        for step in steps:
            outcome = step.get("outcome") or {}
            for call in step.get("calls") or []:
                if call.get("error"):
                    errors.append(f"`{call['key']}`：{call['error'].splitlines()[0]}")
            kind = step.get("kind")
            if kind in ("compact", "discussion"):
                if outcome.get("kind") == "compacted":
                    landed.append(f"`{step['id']}`：摘要落进了会话树（{outcome.get('message', '')}）")
                elif outcome.get("kind") == "failed" and outcome.get("reason") != "model-error":
                    rejected.append(f"`{step['id']}`：{outcome.get('message', '')}；会话树没有追加任何条目")
            if kind == "play":
                for done in outcome.get("compactions") or []:
                    target = landed if done.get("kind") == "compacted" else rejected
                    target.append(f"`{step['id']}` 第 {done.get('after_turn')} 轮后：{done.get('message', '')}")
            if kind == "sync":
                for chat in outcome.get("recapped") or []:
                    landed.append(f"`{step['id']}`：局 {chat} 的复盘写进了 局/{chat}.md")
                for chat in outcome.get("failed") or []:
                    rejected.append(f"`{step['id']}`：局 {chat} 的复盘失败，局/{chat}.md 没有写")
                if outcome.get("merged") == "failed" and not any(
                        c.get("error") for c in step.get("calls") or [] if c.get("purpose") == "merge"):
                    rejected.append(f"`{step['id']}`：合并回复格式不对，手册和常驻摘要都没有改")
    lines: list[str] = []
    if rejected:
        lines += ["被拒收（什么都没写）：", "", *(f"- {r}" for r in rejected), ""]
    if landed:
        lines += ["被接受（写进了树或记忆文件，哪怕内容不可用）：", "", *(f"- {r}" for r in landed), ""]
    if errors:
        lines += ["调用本身失败：", "", *(f"- {e}" for e in errors), ""]
    return lines


def readme(setup: ModelSetup, report: RunReport) -> str:
    """README text for a model run folder."""
    lines = [f"# 实跑记录：{setup.model_id}", ""]
    if setup.plumbing:
        lines += [
            "**这是一次管线演示（plumbing run），不是质量证据。**",
            "",
            "模型是 Gemma 3 270M 的基础模型（没有指令微调），由 llama.cpp（xllamacpp）在本机回环地址上提供，"
            "经 openai SDK 调用，温度 0。它写不出可用的摘要、复盘或合并结果。这次运行证明的是管线："
            "真实模型这条路从 HTTP、用量、耗时到记录都走得通；下面逐条列出代码拿它交回的东西做了什么。",
            "",
        ]
    else:
        lines += [f"模型 `{setup.model_id}`，接口 {setup.endpoint}，参数 {setup.parameters}。", ""]
    findings = _findings(report.records)
    if findings:
        lines += ["## 代码怎么处理模型的输出", "", *findings]
    lines += [
        "## 目录里有什么",
        "",
        "- `out/<场景>.json`：每一步的每次调用：请求（messages、参数）、回复、用量、耗时、来源，以及结果。",
        "- `txt/`：各步骤按场景写出的文件（和 `sim/txt/` 同名，但这里是真实模型的输出）。",
        "- `replies/<场景>.yaml`：录制的回复，每条带它所回答的请求的 sha256；"
        "prompt 一变，重放时报告过期并给出 prompt 差异。",
        "- `run.json`：模型、参数、每个场景的调用数和 token 用量。",
        "",
        "## 每一步的结果",
        "",
    ]
    # Sorted, so the README does not depend on the order scenarios were named on the command line.
    for name, steps in sorted(report.records.items()):
        lines.append(f"### {name}")
        lines.append("")
        lines.extend(_step_line(step) for step in steps)
        lines.append("")
    scenarios = " ".join(sorted(setup.scenario_status))
    lines += [
        "## 重跑和重放",
        "",
        "```bash",
        f"python -m harness run {scenarios} --model {setup.spec}",
        f"python -m harness run {scenarios} --model replay:{setup.folder or setup.out_rel}",
        "```",
    ]
    return "\n".join(lines)


def finish_run(setup: ModelSetup, report: RunReport) -> None:
    """Model runs get ``run.json`` and a ``README.md`` that says what the folder is."""
    if setup.kind == "scripted":
        return
    folder = setup.folder or setup.out_rel
    status = setup.scenario_status.values()
    # The cost line: what the whole run sent and got back, in the endpoint's own tokens.
    cost = {key: sum(int(s.get(key, 0)) for s in status)
            for key in ("calls", "prompt_tokens", "completion_tokens", "latency_ms")}
    info = {**setup.describe(), "folder": folder, "scenarios": setup.scenario_status, "cost": cost,
            "replay": f"python -m harness run --model replay:{folder}"}
    report.artifacts.add_json("run.json", info)
    report.artifacts.add_text("README.md", readme(setup, report))
