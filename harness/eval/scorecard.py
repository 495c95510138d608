"""The scorecard of one run: the checks applied to the artifacts the harness wrote.

Reads ``<base>/out/*.json`` (every step with its calls, replies and outcomes) and the
``<base>/txt`` files they name, where ``<base>`` is ``sim/`` for the scripted run or
``sim/runs/<model>/`` for a model run, and the scenarios' ``gold:`` blocks. Writes
nothing itself (see :mod:`harness.eval`).

Invariant: the scorecard is a pure function of those files. It judges only what a run
recorded: a summary is scored against the turns its own prompt covered (counted from
the prompt's ``<conversation>`` and the previous summary it merged), a merge against
the recaps that existed when it ran, a context against the resident summary the card
had. Fact recall counts only what landed: a reply the memory code refused (a summary that
failed validation, a recap or merge that wrote nothing) is recorded with ``landed: false``
and its reason, and the report scores it 0. A reply that mostly copies its own prompt is
scored without the copied lines (:mod:`harness.eval.echo`). Replies no model wrote are
scored too, and the card says so: a scripted run checks the checkers, it says nothing
about a model. The one exception: a scenario whose every reply is a placeholder (an
imported chat run without a model, :mod:`harness.running.placeholder`) has no card, since there
is nothing written by anyone to score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from liyuan.card.handbook import assemble_handbook
from liyuan.card.prompts import RESIDENT_HEADING, parse_merge_result
from liyuan.context.assemble import SUMMARY_OPENING
from liyuan.context.budget import OMITTED_MARKER
from liyuan.errors import ModelOutputError
from liyuan.story.scribe import validate_summary

from .checks import (
    check_abstention,
    check_latest_scene,
    check_merge_reply,
    check_recap_structure,
    check_resident,
    check_summary_structure,
    fact_in_normalized,
    fact_recall,
    normalize,
    sections,
)
from .echo import measure_echo
from .gold import Gold, ScenarioFile, load_scenarios
from .memory_checks import check_budget, check_forgetting, check_growth

__all__ = ["provenance_of", "score_run"]

_CONVERSATION_RE = re.compile(r"<conversation[^>]*>\n(.*?)\n</conversation>", re.DOTALL)
_PREVIOUS_RE = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.DOTALL)
_CHAT_ATTR_RE = re.compile(r'<conversation\s+chat="([^"]*)"')
_RECAP_ID_RE = re.compile(r'^<recap chat-id="([^"]*)"', re.MULTILINE)
_MESSAGE_RE = re.compile(r"^===== (\d+) · (\w+) =====$", re.MULTILINE)


def provenance_of(model: Mapping[str, Any]) -> dict[str, Any]:
    """How the run is labelled, from the ``model`` field of its ``out/*.json``."""
    if model.get("kind") == "scripted":
        return {"kind": "scripted", "model": None, "plumbing_run": False,
                "label": "脚本回复（人工撰写）：这份评分只检验评分器本身，不说明任何模型的能力"}
    name = str(model.get("model") or model.get("spec") or "?")
    if model.get("plumbing_run"):
        return {"kind": "model", "model": name, "plumbing_run": True,
                "label": f"管线演示（{name}）：真实模型的输出，但只证明这条路走得通，分数不代表摘要质量"}
    return {"kind": "model", "model": name, "plumbing_run": False, "label": f"真实模型 {name} 的输出"}


def _messages(text: str) -> list[tuple[str, str]]:
    """(role, content) of an assembled context as the harness renders it."""
    marks = list(_MESSAGE_RE.finditer(text))
    out = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append((mark.group(2), text[mark.end() + 1:end].rstrip("\n")))
    return out


def _no_reply(call: Mapping[str, Any]) -> dict[str, Any]:
    """A structure verdict for a call that got no reply (a model error, a timeout)."""
    return {"ok": False, "problems": [f"没有回复：{call.get('error') or '未知错误'}"], "chars": 0}


def _recall(facts: list[Any], call: Mapping[str, Any], body: str, *, by_section: bool = False) -> dict[str, Any]:
    """Fact recall of a reply, scored without what it copied when it mostly copied its prompt.

    What counts as copying: the system prompt and the ``<conversation>`` blocks. A summary
    may keep lines of the previous summary, and a merge lines of the recaps it merges:
    that is their job, not an echo.
    """
    request = call.get("request", {})
    conversations = "\n".join(m.group(1) for m in _CONVERSATION_RE.finditer(str(request.get("user", ""))))
    echo = measure_echo(body, f"{request.get('system', '')}\n{conversations}")
    return {**fact_recall(facts, echo.scored_text, by_section=by_section).to_json(), "echo": echo.to_json()}


def _refusal(problems: Sequence[str], fallback: str) -> str:
    return problems[0] if problems else fallback


def _block(tail: str, label: str) -> str:
    for part in tail.split("\n\n"):
        if part.startswith(label + "\n"):
            return part[len(label) + 1:]
    return ""


@dataclass
class _State:
    """What the steps so far left behind, as far as the scorecard needs it."""

    played: dict[str, int] = field(default_factory=dict)
    covered_by_summary: dict[str, int] = field(default_factory=dict)
    """Normalized accepted summary -> the last turn it covers."""
    active_summary: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    """Chat -> accepted summaries with the characters each covered anew."""
    recaps: dict[str, int | None] = field(default_factory=dict)
    """Chats whose recap is on disk -> turns it covers (``None``: hand-written, all facts)."""
    handbook: str | None = None
    resident: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    """Every model-written (or scripted) artifact, for abstention."""


class _Scorer:
    def __init__(self, scenario: Mapping[str, Any], gold: Gold, txt: Path) -> None:
        self.user = str(scenario.get("user", ""))
        chats = scenario.get("chats") or {}
        self.chat_by_name: dict[str, str] = {
            str(c.get("name")): str(cid) for cid, c in chats.items() if isinstance(c, Mapping)}
        self.gold = gold
        self.txt = txt
        self.state = _State()
        self.card: dict[str, list[dict[str, Any]]] = {
            "summaries": [], "recaps": [], "merges": [], "forgetting": [], "budget": []}

    def expected(self, chat: str, through: int | None) -> list[Any]:
        return [f for f in self.gold.facts_of({chat})
                if through is None or (f.turn is not None and f.turn <= through)]

    def step(self, step: Mapping[str, Any]) -> None:
        kind, params, outcome = step["kind"], step.get("params", {}), step.get("outcome", {})
        chat = str(params.get("chat", ""))
        calls = step.get("calls", [])
        if kind == "play" and "turns_played" in outcome:
            self.state.played[chat] = int(outcome["turns_played"])
        for call in calls:
            if call["purpose"] == "summary":
                self.summary(step["id"], chat, call)
        if kind == "write_recap":
            self.state.recaps[chat] = None
        elif kind in ("delete_recap", "delete_chat"):
            self.state.recaps.pop(chat, None)
        elif kind == "sync":
            self.sync(step, calls, outcome)
        elif kind == "edit_memory" and params.get("ref") == "card:resident" and not step.get("failed"):
            self.state.resident = str(params.get("text", "")).strip()  # the user's version is what is sent now
        elif kind == "assemble":
            self.assemble(step, chat, params, outcome)
        elif kind == "fit":
            for row in outcome.get("results", []):
                result = check_budget(None, "账" * int(row["other_chars"]), "", self.state.resident, row.get("result"))
                self.card["budget"].append({"step": step["id"], "what": f"其他块 {row['other_chars']} 字",
                                            **result.to_json()})

    def summary(self, step_id: str, chat: str, call: Mapping[str, Any]) -> None:
        request, reply = call["request"]["user"], call.get("reply")
        conversation = _CONVERSATION_RE.search(request)
        text = conversation.group(1) if conversation else ""
        previous = _PREVIOUS_RE.search(request)
        start = self.state.covered_by_summary.get(normalize(previous.group(1)), 0) if previous else 0
        covered = start + sum(1 for block in text.split("\n\n") if block.startswith(f"{self.user}："))
        record: dict[str, Any] = {"step": step_id, "chat": chat, "covered_through_turn": covered}
        if reply is None:
            record["structure"] = _no_reply(call)
            self.card["summaries"].append(record)
            return
        body = reply["text"]
        self.state.outputs[f"{step_id}:summary"] = body
        structure = check_summary_structure(body)
        record["structure"] = structure.to_json()
        record["recall"] = _recall(self.expected(chat, covered), call, body, by_section=True)
        scenes = self.gold.scenes_of(chat)
        if scenes:
            record["latest_scene"] = check_latest_scene(sections(body).get("当前场景", ""), scenes, covered).to_json()
        normalized = normalize(body)
        record["beyond_coverage"] = [f.id for f in self.gold.facts_of({chat}) if f.turn is not None
                                     and f.turn > covered and fact_in_normalized(f, normalized)]
        try:
            accepted = validate_summary(body)
        except ModelOutputError as error:
            accepted = None
            record["refused"] = str(error)
        record["accepted"] = record["landed"] = accepted is not None
        if accepted is not None:
            self.state.covered_by_summary[normalize(accepted)] = covered
            self.state.active_summary[chat] = accepted
            self.state.summaries.setdefault(chat, []).append((accepted, len(text)))
        self.card["summaries"].append(record)

    def sync(self, step: Mapping[str, Any], calls: Sequence[Mapping[str, Any]], outcome: Mapping[str, Any]) -> None:
        for call in calls:
            if call["purpose"] != "recap":
                continue
            attr = _CHAT_ATTR_RE.search(call["request"]["user"])
            chat = self.chat_by_name.get(attr.group(1), attr.group(1)) if attr is not None else "?"
            if call.get("reply") is None:
                self.card["recaps"].append({"step": step["id"], "chat": chat, "structure": _no_reply(call)})
                continue
            body = call["reply"]["text"]
            self.state.outputs[f"{step['id']}:recap:{chat}"] = body
            through = self.state.played.get(chat, 0)
            structure = check_recap_structure(body).to_json()
            landed = chat in outcome.get("recapped", [])
            recap: dict[str, Any] = {
                "step": step["id"], "chat": chat, "covered_through_turn": through, "structure": structure,
                "recall": _recall(self.expected(chat, through), call, body), "landed": landed}
            if not landed:
                recap["refused"] = _refusal(structure["problems"], "记忆代码没有写下这份复盘")
            self.card["recaps"].append(recap)
            if landed:
                self.state.recaps[chat] = through
        merges = [c for c in calls if c["purpose"] == "merge"]
        if not merges:
            return
        if merges[-1].get("reply") is None:
            self.card["merges"].append({"step": step["id"], "recaps": sorted(self.state.recaps),
                                        "structure": _no_reply(merges[-1])})
            return
        body = merges[-1]["reply"]["text"]
        present = sorted(self.state.recaps)
        # The reply writes the blocks of the recaps it was sent; the code keeps the others.
        structure = check_merge_reply(body, _RECAP_ID_RE.findall(merges[-1]["request"]["user"])).to_json()
        landed = outcome.get("merged") == "ok"
        record: dict[str, Any] = {"step": step["id"], "recaps": present, "structure": structure, "landed": landed}
        if not landed:
            record["refused"] = _refusal(structure["problems"], f"合并结果：{outcome.get('merged')}")
        parsed = parse_merge_result(body)
        if parsed is not None:
            handbook, resident = parsed
            handbook = assemble_handbook(self.state.handbook, handbook, gone=outcome.get("forgotten", []))
            self.state.outputs[f"{step['id']}:handbook"] = handbook
            self.state.outputs[f"{step['id']}:resident"] = resident
            expected = [f for chat, through in self.state.recaps.items() for f in self.expected(chat, through)]
            record["resident"] = check_resident(resident, self.user).to_json()
            record["recall_handbook"] = _recall(expected, merges[-1], handbook)
            record["recall_resident"] = _recall(expected, merges[-1], resident)
            forgotten = set(outcome.get("forgotten", []))
            if forgotten and self.state.handbook is not None and self.state.resident is not None:
                for name, before, after in (("handbook", self.state.handbook, handbook),
                                            ("resident", self.state.resident, resident)):
                    result = check_forgetting(before, after, self.gold.facts, forgotten)
                    self.card["forgetting"].append({"step": step["id"], "file": name,
                                                    "deleted": sorted(forgotten), **result.to_json()})
            if outcome.get("merged") == "ok":
                self.state.handbook, self.state.resident = handbook, resident
        self.card["merges"].append(record)

    def assemble(self, step: Mapping[str, Any], chat: str, params: Mapping[str, Any],
                 outcome: Mapping[str, Any]) -> None:
        context = None
        for rel in step.get("files", []):
            path = self.txt.parent / rel
            if path.is_file() and _MESSAGE_RE.search(path.read_text(encoding="utf-8")):
                context = _messages(path.read_text(encoding="utf-8"))
                break
        record: dict[str, Any] = {"step": step["id"], "what": f"局 {chat} 的上下文"}
        if not context:
            self.card["budget"].append({**record, "ok": None, "problems": ["没有找到这一步写出的上下文文件"]})
            return
        first = context[0][1] if context[0][1].startswith(SUMMARY_OPENING) else ""
        original = self.state.resident
        sent: str | None = None
        at = first.find(RESIDENT_HEADING)
        if at >= 0:
            if original is not None and first.startswith(original, at):
                sent = original
            elif OMITTED_MARKER in first[at:]:
                sent = first[at:first.index(OMITTED_MARKER, at) + len(OMITTED_MARKER)]
            else:
                sent = first[at:]
        if ((outcome.get("record") or {}).get("withheld") or {}).get("resident"):
            # An edit of this chat the card has not merged yet: the resident summary is held back on
            # purpose (issue 38; turn.record.withheld.resident), so the rule is that none is sent.
            problems = [] if sent is None else ["常驻摘要应当扣下（这一局的改动还没合并），上下文里却有一份"]
            self.card["budget"].append({**record, "ok": sent is None, "total": 0, "allowance": 0, "cut": "held",
                                        "problems": problems})
            return
        summary = self.state.active_summary.get(chat) if outcome.get("in_session_summary") else None
        tail = context[-1][1]
        result = check_budget(summary, _block(tail, "【世界状态】"), _block(tail, "【登场名录】"), original, sent)
        self.card["budget"].append({**record, **result.to_json()})

    def finish(self) -> dict[str, Any]:
        card: dict[str, Any] = dict(self.card)
        card["abstention"] = check_abstention(self.gold.never_said, self.state.outputs).to_json()
        card["growth"] = {chat: check_growth([s for s, _ in items], [c for _, c in items]).to_json()
                          for chat, items in sorted(self.state.summaries.items())}
        card["gold"] = {"facts": len(self.gold.facts), "never_said": len(self.gold.never_said),
                        "scenes": len(self.gold.scenes)}
        return card


def _ordered_steps(outs: Sequence[Mapping[str, Any]], step_ids: Sequence[str]) -> list[Mapping[str, Any]]:
    steps = [s for out in outs for s in out.get("steps", [])]
    order = {sid: i for i, sid in enumerate(step_ids)}
    return sorted(steps, key=lambda s: order.get(s["id"], len(order)))


def _read_outs(base: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[str]]]:
    """Each ``out/*.json`` of a run read once: step files per scenario, and every file naming one."""
    outs: dict[str, list[dict[str, Any]]] = {}
    names: dict[str, list[str]] = {}
    for path in sorted((base / "out").glob("*.json")):
        if path.name == "eval.json":
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "scenario" not in data:
            continue
        names.setdefault(str(data["scenario"]), []).append(path.stem)
        if "steps" in data:
            outs.setdefault(str(data["scenario"]), []).append(data)
    return outs, names


def _placeholders_only(outs: Sequence[Mapping[str, Any]]) -> bool:
    """True when every reply of these records is a placeholder (harness.running.placeholder)."""
    replies = [c.get("reply") or {} for out in outs for s in out.get("steps", []) for c in s.get("calls", [])]
    return bool(replies) and all(r.get("provenance") == "placeholder" for r in replies)


def score_run(base: Path, root: Path, scenarios: Mapping[str, ScenarioFile] | None = None) -> dict[str, Any]:
    """Score every scenario a run folder holds.

    Args:
        base: The run's output base: ``sim`` or ``sim/runs/<model>``.
        root: The repository root (scenario files and their gold live in ``sim/scenarios``).
        scenarios: The scenario files already read (:func:`~harness.eval.gold.load_scenarios`),
            so several runs share one read; read from ``root`` when omitted.

    Returns:
        JSON-able: provenance, and per scenario every check's result.

    Raises:
        GoldError: A scenario file cannot be read or its gold is malformed.
    """
    outs, names = _read_outs(base)
    if scenarios is None:
        scenarios = load_scenarios(root)
    cards: dict[str, Any] = {}
    provenance: dict[str, Any] = {}
    for name, files in sorted(outs.items()):
        if _placeholders_only(files):
            continue  # an imported chat run without a model: nothing a model wrote to score
        provenance = provenance_of(files[0].get("model", {}))
        scenario = scenarios.get(name) or ScenarioFile({}, Gold())
        scorer = _Scorer(scenario.data, scenario.gold, base / "txt")
        step_ids = [s.get("id") for s in (scenario.data.get("steps") or [])]
        for step in _ordered_steps(files, step_ids):
            scorer.step(step)
        cards[name] = {"out_files": sorted(f"out/{n}.json" for n in names.get(name, [])),
                       "provenance": provenance_of(files[0].get("model", {})), **scorer.finish()}
    return {"provenance": provenance, "scenarios": cards}
