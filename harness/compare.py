"""Recorded runs side by side: ``python -m harness compare RUN_DIR... [--out FILE]``.

For every scenario step and model call, each run's reply next to the others (the scripted
demo included and labelled as hand-written), then the scorecards of all runs in one table
(:mod:`harness.eval`), plus calls, tokens and latency from the records. The same Markdown
serves the terminal and the site's 「模型对比」 page (``site=True`` puts the runs in tabs).

Invariant: pure reading. A run folder is ``sim/`` (the scripted run) or
``sim/runs/<model>/``; nothing is written except ``--out``. Labels come from each run's
own ``run.json``, so a plumbing run says so wherever its replies appear.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liyuan.errors import ConfigError

from .running.artifacts import atomic_write
from .running.command import Subcommand, add_root_option, find_root

__all__ = ["COMMANDS", "COMPARE", "DEFAULT_OUT", "Run", "compare_markdown", "load_run", "main", "run_folders"]

SCRIPTED_LABEL = "脚本回复（人工撰写的示范，不是模型输出）"
PLACEHOLDER_LABEL = "框架生成的占位（不是模型输出，也不是人写的示范）"
"""A reply with provenance ``placeholder``: the harness wrote it because no model ran."""
NO_USAGE = "未报告（脚本回复没有用量）"


@dataclass
class Run:
    """One run folder, read."""

    label: str
    path: str
    plumbing: bool
    records: dict[str, dict[str, Any]]
    """``out`` name to the record file's content."""
    card: dict[str, Any]
    """Its scorecard (:func:`harness.eval.scorecard.score_run`)."""
    info: dict[str, Any]


def run_folders(root: Path) -> list[Path]:
    """The scripted run (``sim/``) and every recorded folder under ``sim/runs/``, sorted."""
    runs = root / "sim" / "runs"
    found = [root / "sim"]
    if runs.is_dir():
        found += [p for p in sorted(runs.iterdir()) if (p / "out").is_dir()]
    return found


def load_run(folder: Path, root: Path) -> Run:
    """Read a run folder (its ``out/*.json`` and ``run.json``) and score it.

    Raises:
        ConfigError: The folder has no ``out/*.json``.
    """
    from .eval.gold import load_scenarios
    from .eval.scorecard import score_run

    outs = sorted((folder / "out").glob("*.json"))
    records = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in outs if p.stem != "eval"}
    if not records:
        raise ConfigError(f"{folder} 里没有 out/*.json：不是一次运行的目录")
    info_path = folder / "run.json"
    info: dict[str, Any] = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
    plumbing = bool(info.get("plumbing_run"))
    if not info:
        label = SCRIPTED_LABEL
    else:
        label = str(info.get("model") or info.get("spec") or folder.name)
        if plumbing:
            label += "（管线演示，不代表质量）"
        elif info.get("kind") == "replay":
            label += "（重放的录制）"
    shown = folder.resolve().relative_to(root.resolve()).as_posix() if folder.resolve().is_relative_to(
        root.resolve()) else str(folder)
    return Run(label, shown, plumbing, records, score_run(folder, root, load_scenarios(root)), info)


def _reply(call: Mapping[str, Any] | None) -> str:
    if call is None:
        return "（这次运行没有这次调用）"
    if call.get("error"):
        return f"（调用失败：{str(call['error']).splitlines()[0]}）"
    reply = call.get("reply") or {}
    return str(reply.get("text", "")).strip() or "（空回复）"


def _label(run: Run, call: Mapping[str, Any] | None) -> str:
    """The run's label, unless this reply's own provenance says it is a placeholder."""
    if call is not None and (call.get("reply") or {}).get("provenance") == "placeholder":
        return PLACEHOLDER_LABEL
    return run.label


def _placeholders(run: Run) -> int:
    return sum(1 for r in run.records.values() for s in r.get("steps", []) for c in s.get("calls", [])
               if (c.get("reply") or {}).get("provenance") == "placeholder")


def _fence(text: str, indent: str = "") -> list[str]:
    ticks = "````" if "```" in text else "```"
    body = [f"{indent}{line}" if line else "" for line in text.splitlines()]
    return [f"{indent}{ticks}text", *body, f"{indent}{ticks}"]


def _calls(runs: Sequence[Run]) -> list[tuple[str, str, str, str, dict[str, dict[str, Any]]]]:
    """(out name, step id, step kind, call key, run label -> call) in the first run's order."""
    order: list[tuple[str, str, str, str]] = []
    found: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for run in runs:
        for out_name, record in sorted(run.records.items()):
            for step in record.get("steps", []):
                for call in step.get("calls", []):
                    key = (out_name, step["id"], call["key"])
                    if key not in found:
                        found[key] = {}
                        order.append((out_name, step["id"], step.get("kind", ""), call["key"]))
                    found[key][run.path] = call
    return [(o, s, k, c, found[(o, s, c)]) for o, s, k, c in order]


def _usage(run: Run) -> tuple[int, int, int, int]:
    calls = [c for r in run.records.values() for s in r.get("steps", []) for c in s.get("calls", [])]
    tokens_in = sum(((c.get("reply") or {}).get("usage") or {}).get("prompt_tokens", 0) for c in calls)
    tokens_out = sum(((c.get("reply") or {}).get("usage") or {}).get("completion_tokens", 0) for c in calls)
    latency = sum(int((c.get("reply") or {}).get("latency_ms", 0)) for c in calls)
    return len(calls), tokens_in, tokens_out, latency


def _score_table(runs: Sequence[Run]) -> list[str]:
    from .eval.report import scorecard_rows

    rows: dict[tuple[str, str], dict[str, str]] = {}
    for run in runs:
        for scenario, card in run.card["scenarios"].items():
            for check, result in scorecard_rows(card):
                rows.setdefault((scenario, check), {})[run.path] = result
        calls, tokens_in, tokens_out, latency = _usage(run)
        rows.setdefault(("全部", "调用次数"), {})[run.path] = str(calls)
        rows.setdefault(("全部", "tokens（输入→输出）"), {})[run.path] = (
            f"{tokens_in}→{tokens_out}" if tokens_in or tokens_out else NO_USAGE)
        rows.setdefault(("全部", "模型耗时"), {})[run.path] = f"{latency / 1000:.1f} s" if latency else "—"
    head = "| 场景 | 检查 | " + " | ".join(run.label for run in runs) + " |"
    lines = [head, "|---|---|" + "---|" * len(runs)]
    for (scenario, check), cells in rows.items():
        values = [cells.get(run.path, "—（这次运行没有这一项）" if scenario in run.card["scenarios"]
                            or scenario == "全部" else "（没有这个场景）").replace("|", "\\|") for run in runs]
        lines.append(f"| {scenario} | {check} | " + " | ".join(values) + " |")
    return lines


def compare_markdown(runs: Sequence[Run], *, site: bool = False) -> str:
    """Replies per step and call, run beside run; then one scorecard table for all runs.

    Args:
        runs: The runs, in column order.
        site: Tabs (pymdownx.tabbed) instead of one section per run, for the 「模型对比」 page.
    """
    out = ["## 参与对比的运行", ""]
    for run in runs:
        calls, tokens_in, tokens_out, _latency = _usage(run)
        note = f"：{run.info['note']}" if run.info.get("note") else ""
        tokens = f"tokens {tokens_in}→{tokens_out}" if tokens_in or tokens_out else f"tokens {NO_USAGE}"
        placeholders = _placeholders(run)
        if placeholders:
            note += f"；其中 {placeholders} 次回复是{PLACEHOLDER_LABEL}，标签按每条回复的出处写"
        out.append(f"- **{run.label}**（`{run.path}`，{calls} 次调用，{tokens}）{note}")
    out += ["", "## 每一次调用的回复", ""]
    for out_name, step_id, kind, key, by_run in _calls(runs):
        out.append(f"### {out_name} · {step_id}（{kind}）· `{key}`")
        out.append("")
        for run in runs:
            text = _reply(by_run.get(run.path))
            label = _label(run, by_run.get(run.path))
            if site:
                out.append(f'=== "{label}"')
                out.append("")
                out.extend(_fence(text, "    "))
            else:
                out.append(f"**{label}**")
                out.append("")
                out.extend(_fence(text))
            out.append("")
    out += ["## 评分卡", "", *_score_table(runs), ""]
    return "\n".join(out)


DEFAULT_OUT = Path("sim") / "compare.md"
"""Where ``compare`` writes by default (relative to the project; ignored by git)."""


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, help="运行目录：sim/ 或 sim/runs/<模型>/")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"写到这个 Markdown 文件（默认项目里的 {DEFAULT_OUT.as_posix()}；- 打印到标准输出）")
    add_root_option(parser)


def _summary(runs: Sequence[Run]) -> list[str]:
    lines = []
    for run in runs:
        calls = sum(len(step.get("calls") or []) for record in run.records.values() for step in record.get("steps", []))
        lines.append(f"  {run.label}：{len(run.records)} 份记录、{calls} 次调用")
    return lines


def _compare(args: argparse.Namespace) -> int:
    try:
        root = find_root(args.root)
        runs = [load_run(folder.resolve(), root) for folder in args.runs]
    except (ConfigError, OSError, ValueError) as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    text = compare_markdown(runs)
    if args.out is not None and str(args.out) == "-":
        sys.stdout.write(text)
        return 0
    out = args.out if args.out is not None else root / DEFAULT_OUT
    atomic_write(out, text.encode("utf-8"))
    print(f"写出 {out}（{len(runs)} 次运行并排，{len(text.encode('utf-8')) // 1024} KB）：")
    print("\n".join(_summary(runs)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness compare RUN_DIR... [--out FILE]``."""
    return COMPARE.main(argv)


COMPARE = Subcommand("compare", "把几次运行的回复和评分并排写进一个文件",
                     "把几次运行（sim/ 和 sim/runs/<模型>/）的每次调用的回复、用量和评分卡并排写进一个 Markdown 文件"
                     f"（默认 {DEFAULT_OUT.as_posix()}），终端上只打印一段小结。",
                     _configure, _compare)
COMMANDS = (COMPARE,)
