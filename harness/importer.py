"""``python -m harness import FILE``: turn a chat people already have into a scenario.

The file is read with :mod:`liyuan.session.imports` (SillyTavern, OpenAI-format logs,
transcripts) and written as ``sim/scenarios/<name>.yaml``: the chat's turns (a user
turn and the reply to it), its swipes as rerolls, the messages outside the story as
notes, and three steps: play every turn with the end-of-turn compaction, assemble the
context for the next turn (where the 【前情提要】 message shows), and sync the card
memory (recap, handbook, resident summary). Run it with ``python -m harness run NAME``.

Invariants:

- Nothing is written unless the whole file reads; the scenario file is replaced
  atomically, and it loads (it is checked with :func:`harness.running.scenario.load_scenario`
  before it is moved into place).
- The scenario records where the chat came from (format, sha256, counts) and never the
  file's path or name; the only names in it are those the chat itself holds.
- Turns: consecutive messages of one side are joined with a blank line, as the history
  sent to the model joins them; a swiped-away piece becomes a reroll of the turn's whole
  text up to that piece (what its side branch reads); empty messages are left out.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from liyuan.errors import LiyuanError
from liyuan.fileio import atomic_write_text
from liyuan.session.imports import FORMATS, ChatReader, ChatSource, ImportedMessage, safe_chat_id, safe_folder_name
from liyuan.story.compact import DEFAULT_EVERY_N_TURNS, KEEP_RECENT_TURNS, MIN_COMPACT_CHARS

from .running.artifacts import FileDiff, unified
from .running.command import Subcommand, add_root_option, find_root
from .running.replies import dump_yaml
from .running.scenario import load_scenario

__all__ = ["COMMANDS", "IMPORT", "ImportResult", "build_scenario", "import_drift", "import_file", "main",
           "render_scenario"]

CLOSING_USER = "（框架补的一条用户消息：导入的聊天到这里为止，用它看下一轮组装出的上下文）"
PROGRESS_EVERY = 1000


@dataclass
class _Turn:
    user: list[str] = field(default_factory=list)
    user_swipes: list[str] = field(default_factory=list)
    reply: list[str] = field(default_factory=list)
    swipes: list[str] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"user": "\n\n".join(self.user), "reply": "\n\n".join(self.reply)}
        if self.swipes:
            data["swipes"] = self.swipes
        if self.user_swipes:
            data["user_swipes"] = self.user_swipes
        if self.notes:
            data["notes"] = self.notes
        return data


def _note(message: ImportedMessage) -> dict[str, str]:
    data = {"kind": message.note_kind, "role": message.note_role, "name": message.name, "text": message.text}
    return {k: v for k, v in data.items() if v}


def _add(pieces: list[str], alternatives: list[str], message: ImportedMessage) -> None:
    """Add a message's text to a side of a turn; its swipes read as the side up to there."""
    prefix = "\n\n".join(pieces)
    for _, text in message.alternatives:
        if text.strip():
            alternatives.append(f"{prefix}\n\n{text.strip()}" if prefix else text.strip())
    pieces.append(message.text.strip())


@dataclass
class ChatTurns:
    """A chat as a scenario plays it."""

    greeting: list[str] = field(default_factory=list)
    greeting_swipes: list[str] = field(default_factory=list)
    opening_notes: list[dict[str, str]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    closing_user: str | None = None
    """The chat's last user message when no reply followed it."""
    empty: int = 0
    """Messages without text, left out."""


def chat_turns(messages: Iterable[ImportedMessage]) -> ChatTurns:
    """Group messages into an opening and turns (see the module docstring)."""
    out = ChatTurns()
    current: _Turn | None = None
    for message in messages:
        if message.role == "note":
            (current.notes if current is not None else out.opening_notes).append(_note(message))
        elif not message.text.strip():
            out.empty += 1
        elif message.role == "user":
            if current is not None and current.reply:
                out.turns.append(current.to_yaml())
                current = None
            current = current or _Turn()
            _add(current.user, current.user_swipes, message)
        elif current is None:  # the greeting, or what follows it before the first user turn
            _add(out.greeting, out.greeting_swipes, message)
        else:
            _add(current.reply, current.swipes, message)
    if current is not None and current.reply:
        out.turns.append(current.to_yaml())
    elif current is not None:
        out.closing_user = "\n\n".join(current.user)
        if out.turns:
            out.turns[-1].setdefault("notes", []).extend(current.notes)
        else:
            out.opening_notes.extend(current.notes)
    return out


@dataclass
class ImportResult:
    """What an import produced."""

    name: str
    path: Path
    source: ChatSource
    turns: int
    seconds: float


def _compactions_expected(turns: int) -> int:
    return max(0, (turns - KEEP_RECENT_TURNS) // DEFAULT_EVERY_N_TURNS)


def build_scenario(name: str, source: ChatSource, chat: ChatTurns, *, card: str | None,
                   chat_id: str | None) -> dict[str, Any]:
    """The scenario data for an imported chat (see the module docstring)."""
    user = source.user_name or "用户"
    char = source.char_name or "角色"
    cid = safe_chat_id(chat_id or "imported")
    stem = safe_chat_id(name)
    display = chat_id or (f"和{source.char_name}的聊天" if source.char_name else "导入的聊天")
    counts = f"{source.messages} 条消息、{source.swipes} 个备选、{source.notes} 条戏外消息"
    spec: dict[str, Any] = {"name": display,
                            "note": f"从 {source.format} 聊天记录导入：{counts}；{len(chat.turns)} 轮"}
    if chat.greeting:
        spec["greeting"] = "\n\n".join(chat.greeting)
        if chat.greeting_swipes:
            spec["greeting_swipes"] = chat.greeting_swipes
    if chat.opening_notes:
        spec["notes"] = chat.opening_notes
    spec["turns"] = chat.turns
    play_files = {"log": f"{stem}-play.txt"}
    for i in range(1, min(3, _compactions_expected(len(chat.turns))) + 1):
        play_files[f"prompt_{i}"] = f"{stem}-summary-{i}-prompt.txt"
        play_files[f"summary_{i}"] = f"{stem}-summary-{i}.txt"
    closing = chat.closing_user or CLOSING_USER
    return {
        "name": name,
        "title": f"导入的聊天：{display}",
        "description": (f"一份 {source.format} 聊天记录（{counts}），逐轮写进会话树，按应用的规则自动压缩；"
                        "再组装下一轮的上下文，最后给整张卡同步一次跨局记忆。"),
        "card": safe_folder_name(card or source.char_name, "导入的卡"),
        "user": user,
        "char": char,
        "language": "中文",
        "out": stem,
        "source": source.to_json(),
        "chats": {cid: spec},
        "steps": [
            {"id": "play", "kind": "play", "chat": cid,
             "note": (f"逐轮写进会话树；每轮之后照常检查一次压缩（周期 {DEFAULT_EVERY_N_TURNS} 轮、"
                      f"保留 {KEEP_RECENT_TURNS} 轮、{MIN_COMPACT_CHARS} 字门槛）。"),
             "files": play_files},
            {"id": "next-turn", "kind": "assemble", "chat": cid, "user": closing,
             "note": ("聊天最后一条用户消息还没有回复：用它组装上下文。" if chat.closing_user else
                      "框架补一条用户消息，组装下一轮发给主模型的上下文：摘要以【前情提要】出现在最前面。"),
             "files": {"history": f"{stem}-history.txt", "injection": f"{stem}-injection.txt"}},
            {"id": "sync", "kind": "sync",
             "note": "给整张卡同步一次跨局记忆：写这一局的复盘，合并出记忆手册和常驻摘要。",
             "files": {"recap_prompt": {cid: f"{stem}-recap-prompt.txt"}, "recap": {cid: f"{stem}-recap.txt"},
                       "resident": f"{stem}-resident.txt"}},
        ],
    }


def render_scenario(data: dict[str, Any]) -> str:
    """The scenario's YAML, its ``source`` and ``steps`` between snippet markers.

    The markers are YAML comments, so the file loads as before; the docs include the
    marked parts by name (``pymdownx.snippets``) instead of by line numbers that shift.
    """
    parts = []
    for key, value in data.items():
        chunk = dump_yaml({key: value})
        if key in ("source", "steps"):
            chunk = f"# --8<-- [start:{key}]\n{chunk}# --8<-- [end:{key}]\n"
        parts.append(chunk)
    return "".join(parts)


def _header(source: ChatSource) -> str:
    return (f"# 导入的聊天：由 python -m harness import 从一份 {source.format} 聊天记录生成"
            f"（sha256 {source.sha256[:12]}…）。\n"
            "# 对话原样来自那份文件。用 --model scripted 运行时，摘要、复盘和记忆是占位回复，不是模型输出；\n"
            "# 用 --model openai:<模型名> 运行，由真实模型来写（写进 sim/runs/<模型>/）。\n")


def import_file(path: Path, *, root: Path, fmt: str | None = None, card: str | None = None,
                chat_id: str | None = None, out: Path | None = None, user_name: str | None = None,
                conversation: int = 1, say: Any = None) -> ImportResult:
    """Read a chat file and write its scenario.

    Raises:
        ChatImportError: The file cannot be imported (nothing is written).
        ScenarioError: The scenario would not load (nothing is written).
    """
    started = time.perf_counter()
    reader = ChatReader(path, fmt, user_name=user_name, conversation=conversation)

    def counted() -> Iterable[ImportedMessage]:
        for number, message in enumerate(reader.messages(), start=1):
            if say is not None and number % PROGRESS_EVERY == 0:
                say(f"已读 {number} 条消息 · {time.perf_counter() - started:.2f} s")
            yield message

    chat = chat_turns(counted())
    source = reader.source
    assert source is not None
    if not chat.turns:
        raise LiyuanError("聊天里没有一问一答的轮次（至少要有一条用户消息和它后面的回复），没有可以演的内容")
    name = out.stem if out is not None else f"import-{source.sha256[:8]}"
    target = out if out is not None else root / "sim" / "scenarios" / f"{name}.yaml"
    data = build_scenario(name, source, chat, card=card, chat_id=chat_id)
    text = _header(source) + render_scenario(data)
    with tempfile.TemporaryDirectory() as folder:
        check = Path(folder) / f"{name}.yaml"
        check.write_text(text, encoding="utf-8")
        load_scenario(check)  # the file we write must load
    atomic_write_text(target, text)
    return ImportResult(name, target, source, len(chat.turns), time.perf_counter() - started)


def import_drift(root: Path) -> list[FileDiff]:
    """Imported scenarios that a fresh import of their file in ``sim/imports/`` would change.

    A scenario is matched to its file by the sha256 it records (it records no path);
    one whose file is not in ``sim/imports/`` (a chat someone brought) is left alone.
    Paths in the result are relative to ``sim/``, as :func:`harness.running.review.check` reports.
    """
    folder = root / "sim" / "imports"
    if not folder.is_dir():
        return []
    by_sha = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in sorted(folder.iterdir()) if p.is_file()}
    diffs: list[FileDiff] = []
    for path in sorted((root / "sim" / "scenarios").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        source = raw.get("source") if isinstance(raw, dict) else None
        if not isinstance(source, dict) or str(source.get("sha256")) not in by_sha:
            continue
        chat_file = by_sha[str(source.get("sha256"))]
        chat_id, spec = next(iter(raw["chats"].items()))
        with tempfile.TemporaryDirectory() as folder_name:
            out = Path(folder_name) / path.name
            import_file(chat_file, root=root, fmt=source["format"], card=raw.get("card"),
                        chat_id=None if chat_id == "imported" else spec.get("name"), out=out,
                        user_name=raw.get("user") if source["format"] == "transcript" else None,
                        conversation=int(source.get("conversation", 1)))
            fresh = out.read_text(encoding="utf-8")
        committed = path.read_text(encoding="utf-8")
        if fresh != committed:
            label = f"scenarios/{path.name}"
            diffs.append(FileDiff(label, "changed", unified(committed, fresh, f"已提交/{label}",
                                                            f"重新导入 {chat_file.name}/{label}")))
    return diffs


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="聊天记录文件，或角色卡（JSON、PNG、CHARX）、设定集、世界书")
    parser.add_argument("--format", choices=FORMATS, default=None, help="文件格式（默认自动识别）")
    parser.add_argument("--card", default=None, help="卡名（默认用聊天里的角色名）")
    parser.add_argument("--chat", default=None, help="局的名字或 id（不是合法 id 时自动换成一个）")
    parser.add_argument("--out", type=Path, default=None,
                        help="场景文件（默认 sim/scenarios/import-<sha256 前 8 位>.yaml）")
    parser.add_argument("--user", default=None, help="纯文本记录：哪个说话人是用户（默认第二个出场的人）")
    parser.add_argument("--conversation", type=int, default=1, help="OpenAI JSONL 里有多段对话时导入第几段（默认 1）")
    add_root_option(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="不打印进度")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m harness import``; 0 success, 2 bad input."""
    return IMPORT.main(argv)


def _import(args: argparse.Namespace) -> int:
    try:
        root = find_root(args.root)
    except LiyuanError as exc:
        print(f"错误：{exc}（什么都没有写）", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        if not args.quiet:
            print(f"[import] {line}", file=sys.stderr, flush=True)

    from .card_import import import_card_file, looks_like_card

    if args.format is None and looks_like_card(args.file):  # a character card or lore book (issue 23)
        try:
            written = import_card_file(args.file, root=root, user=args.user, out=args.out)
        except LiyuanError as exc:
            print(f"错误：{exc}（什么都没有写）", file=sys.stderr)
            return 2
        shown = written.relative_to(root).as_posix() if written.is_relative_to(root) else str(written)
        print(f"写出 {shown}；运行：python -m harness run {written.stem}")
        return 0
    try:
        result = import_file(args.file, root=root, fmt=args.format, card=args.card, chat_id=args.chat,
                             out=args.out, user_name=args.user, conversation=args.conversation, say=say)
    except LiyuanError as exc:
        print(f"错误：{exc}（什么都没有写）", file=sys.stderr)
        return 2
    source = result.source
    say(f"读完：{source.messages} 条消息、{source.swipes} 个备选、{source.notes} 条戏外消息 → {result.turns} 轮"
        f" · {result.seconds:.2f} s")
    if source.conversations > 1:
        say(f"文件里有 {source.conversations} 段对话，导入的是第 {source.conversation} 段（--conversation 可选别的）")
    shown = result.path.relative_to(root).as_posix() if result.path.is_relative_to(root) else str(result.path)
    print(f"写出 {shown}；运行：python -m harness run {result.name}")
    return 0


IMPORT = Subcommand("import", "把已有的聊天记录、角色卡或设定集导入成场景",
                    "把已有的聊天记录（SillyTavern JSONL、OpenAI 消息、纯文本）转成一个场景文件"
                    " sim/scenarios/<名字>.yaml："
                    "对话原样、备选回复成旁支、戏外消息另记；角色卡（V2/V3 的 JSON、PNG、CHARX）、"
                    "设定集和世界书导入成带设定集的卡；之后 python -m harness run <名字> 逐轮演它。",
                    _configure, _import)
COMMANDS = (IMPORT,)
