"""The two public conversational-memory sets, read as an app would store them (issue 36).

Neither set is in this repository (LoCoMo is CC BY-NC 4.0; both are fetched by whoever
measures): :func:`load_locomo` and :func:`load_madial` read a clone of the data set's
repository (a work tree or a bare git directory, read at ``HEAD``) or, for LoCoMo, the
zip or the folder of conversation files, and record the repository's commit.

- **LoCoMo** (``snap-research/locomo``, ``data/locomo10.zip``): ten long two-person
  conversations; each question names its evidence turns (``D<session>:<turn>``).
  Adversarial questions (category 5, whose answer is not in the conversation) are left
  out, as are evidence ids that name no turn; a question with no evidence left is skipped.
  A turn is stored as ``名字：正文`` (the way :func:`liyuan.story.history.serialize_for_summary`
  writes an archive's turns), an image's caption appended, so the keyword list can match
  the speakers' names.
- **MADial-Bench** (``hejunqing/MADial-Bench``, ``data/ch`` and ``data/en``): a memory
  archive per user (each memory one event sentence) and dialogues in which the assistant
  recalls memories at the ``test-turn``; ``relevant-id`` lists the memories that count.
  The query is the user's last utterance before the first test turn (``last``) or the
  whole dialogue before it (``history``).

Invariant: loading changes nothing on disk and asks no network.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liyuan.errors import ConfigError

__all__ = ["Conversation", "MadialSet", "Question", "load_locomo", "load_madial", "repo_commit"]

LOCOMO_ZIP = "data/locomo10.zip"
MADIAL_FILES = {"zh": ("data/ch/MADial-Bench-zh-dialogue.json", "data/ch/MADial-Bench-zh-memory.json"),
                "en": ("data/en/MADial-Bench-en-dialogue.json", "data/en/MADial-Bench-en-memory.json")}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SPEAKER = re.compile(r'^\s*<([^>]+)>\s*:\s*"?(.*?)"?\s*$', re.S)


@dataclass(frozen=True)
class Question:
    """One query and the ids of the documents that answer it."""

    text: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its sessions (lists of ``(dia_id, stored text)``) and questions."""

    name: str
    sessions: tuple[tuple[tuple[str, str], ...], ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class MadialSet:
    """One language of MADial-Bench: memories per user and the questions of each query form."""

    memories: dict[int, dict[str, str]]
    """user id -> memory id -> event sentence"""
    questions: dict[str, tuple[tuple[int, Question], ...]]
    """query form (``last``, ``history``) -> ``(user id, question)``"""


def repo_commit(path: Path) -> str:
    """The commit ``HEAD`` of the git repository at ``path`` (a work tree or a git directory)."""
    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ConfigError(f"{path} 不是 git 仓库，记不下数据的提交号：请给数据集仓库的克隆") from exc


def _read(repo: Path, rel: str) -> bytes:
    """``rel`` from the work tree of ``repo`` if it is there, else from its ``HEAD``."""
    if (repo / rel).is_file():
        return (repo / rel).read_bytes()
    try:
        return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{rel}"], capture_output=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ConfigError(f"{repo} 里没有 {rel}") from exc


def _locomo_files(path: Path) -> dict[str, dict[str, Any]]:
    if path.is_dir() and not any(path.glob("*.json")):
        data = _read(path, LOCOMO_ZIP)
    elif path.is_dir():
        return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(path.glob("*.json"))}
    else:
        data = path.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {Path(n).stem: json.loads(archive.read(n)) for n in sorted(archive.namelist()) if n.endswith(".json")}


def _turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}：{turn['text']}"
    return f"{text} [image: {turn['blip_caption']}]" if turn.get("blip_caption") else text


def load_locomo(path: Path) -> list[Conversation]:
    """Every conversation of LoCoMo at ``path`` (see the module docstring)."""
    conversations = []
    for name, raw in _locomo_files(path).items():
        keys = sorted((k for k in raw if re.fullmatch(r"session_\d+", k) and isinstance(raw[k], list) and raw[k]),
                      key=lambda k: int(k.split("_")[1]))
        sessions = tuple(tuple((t["dia_id"], _turn_text(t)) for t in raw[k]) for k in keys)
        ids = {dia_id for session in sessions for dia_id, _ in session}
        questions = []
        for qa in raw["qa"]:
            if qa.get("category") == 5:
                continue
            found = {f"D{int(s)}:{int(t)}" for e in qa.get("evidence") or [] for s, t in _EVIDENCE.findall(e)}
            if relevant := frozenset(found & ids):
                questions.append(Question(str(qa["question"]), relevant))
        conversations.append(Conversation(name, sessions, tuple(questions)))
    if not conversations:
        raise ConfigError(f"{path} 里没有 LoCoMo 的对话")
    return conversations


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _utterance(line: str) -> tuple[str, str]:
    match = _SPEAKER.match(line)
    return (match.group(1).strip(), match.group(2).strip()) if match else ("", line.strip())


def load_madial(repo: Path, language: str) -> MadialSet:
    """One language (``zh`` or ``en``) of MADial-Bench in the clone ``repo``.

    The English memory file names no user; its ids are the Chinese file's, so the owner
    of an English memory is read from the Chinese file.
    """
    dialogue_file, memory_file = MADIAL_FILES[language]
    owners = {k: int(v["user-id"]) for row in _lines(_read(repo, MADIAL_FILES["zh"][1])) for k, v in row.items()}
    memories: dict[int, dict[str, str]] = {}
    for row in _lines(_read(repo, memory_file)):
        for key, value in row.items():
            memories.setdefault(owners[key], {})[key] = str(value["event"])
    questions: dict[str, list[tuple[int, Question]]] = {"last": [], "history": []}
    for row in _lines(_read(repo, dialogue_file)):
        turn = min(row["test-turn"])
        said = [_utterance(line) for line in row["dialogue"][1:turn] if line.strip() not in ("<BOD>", "<EOD>")]
        relevant = frozenset(str(r) for r in row["relevant-id"])
        user = int(row["user-id"])
        questions["last"].append((user, Question(said[-1][1], relevant)))
        questions["history"].append((user, Question("\n".join(f"{who}：{text}" for who, text in said), relevant)))
    return MadialSet(memories, {form: tuple(rows) for form, rows in questions.items()})
