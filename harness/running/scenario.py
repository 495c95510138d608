"""Scenario files (``sim/scenarios/*.yaml``): schema, loading, validation.

Invariant: a :class:`Scenario` that loads is complete and self-consistent: every step
has a known kind, only the parameters that kind accepts (with the right types), refers
to chats that exist, and names its output files under ``sim/txt/`` with no two steps
writing the same file. Anything else fails at load time with a Chinese message that
names the file and the field, before any step runs.

The schema is documented in ``docs/harness.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from liyuan.config import MemoryConfig
from liyuan.errors import ConfigError

from .chatspec import (
    ID_RE,
    TYPE_NAMES,
    ChatSpec,
    Check,
    Ctx,
    ScenarioError,
    ScriptedTurn,
    is_int,
    is_int_list,
    is_mapping,
    is_str,
    parse_chat,
    parse_source,
)
from .oldkeys import upgrade_old_keys

__all__ = [
    "STEP_KINDS",
    "ChatSpec",
    "Scenario",
    "ScenarioError",
    "ScriptedTurn",
    "StepKind",
    "StepSpec",
    "load_scenario",
    "scenario_names",
]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when built in (an imported chat of thousands of turns loads ten
times faster), else the pure-Python one; both build the same data."""
_FILE_RE = re.compile(r"[A-Za-z0-9_.-]+\.(txt|md|json)")


@dataclass(frozen=True)
class StepKind:
    """What one kind of step accepts."""

    name: str
    summary: str
    """One line, Chinese, for docs and error messages."""
    required: Mapping[str, Check] = field(default_factory=dict)
    optional: Mapping[str, Check] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    """File keys the step can write (``prompt``, ``summary`` ...)."""
    per_chat_files: tuple[str, ...] = ()
    """File keys whose value maps chat id to file name (a sync recaps several chats)."""
    chat_params: tuple[str, ...] = ("chat",)
    """Parameters that must name a chat of the scenario."""


# --8<-- [start:step_kinds]
STEP_KINDS: dict[str, StepKind] = {
    k.name: k
    for k in (
        StepKind("play", "逐轮演聊天定义里的轮次：chat.prepare 再 chat.record（每轮之后照常检查压缩、写入向量记忆）",
                 required={"chat": is_str},
                 optional={"upto": is_int},
                 files=("log", "prompt_1", "prompt_2", "prompt_3", "summary_1", "summary_2", "summary_3")),
        StepKind("compact", "手动压缩一次，即 /compact（chat.compact_now：周期 1、500 字门槛）",
                 required={"chat": is_str},
                 files=("prompt", "prompt_user", "summary", "outcome")),
        StepKind("assemble", "来一条新的用户消息，看组装出的下一轮上下文（chat.preview，不写入会话）",
                 required={"chat": is_str, "user": is_str},
                 files=("history", "context", "injection", "record")),
        StepKind("sync", "给整张卡同步一次跨局记忆：写复盘、合并手册和常驻摘要、遗忘",
                 chat_params=(),
                 files=("merge_prompt", "merge_prompt_user", "merge_prompt_tail", "handbook", "resident"),
                 per_chat_files=("recap_prompt", "recap")),
        StepKind("write_recap", "手写一局的复盘（标注为手写，不是模型输出）",
                 required={"chat": is_str, "text": is_str},
                 files=("recap",)),
        StepKind("delete_recap", "删掉一局的复盘文件（软路径：下次合并时按来源遗忘）",
                 required={"chat": is_str}),
        StepKind("delete_chat", "删掉一局（会话和复盘）", required={"chat": is_str}),
        StepKind("edit_memory", "手改一份记忆（card.memory.change_memory：硬路径，带版本号；手改的汇总会暂停合并）",
                 required={"ref": is_str, "text": is_str}, chat_params=(), files=("memory",)),
        StepKind("import_chat", "把 sim/imports/ 里的一份聊天记录整份导入成新的一局（card.import_chat）",
                 required={"chat": is_str, "file": is_str}, optional={"format": is_str}, files=("branch",)),
        StepKind("fit", "常驻摘要和账本共用预算：给定其他块的字数，演示截断（只演示预算这一层）",
                 required={"other": is_int_list}, chat_params=(), files=("fit",)),
        StepKind("reroll", "重来：同一条用户消息换一个回复（旧回复留在树上，成了旁支）",
                 required={"chat": is_str, "reply": is_str},
                 optional={"ledger": is_mapping}, files=("branch",)),
        StepKind("rewind", "回档：把会话叶子移回第 N 轮的回复之后",
                 required={"chat": is_str, "turn": is_int}, files=("branch",)),
        StepKind("edit_turn", "改第 N 轮的回复（chat.edit：后面的轮次都在；盖住它的摘要作废、从之前的摘要起重写）",
                 required={"chat": is_str, "turn": is_int, "text": is_str},
                 files=("change", "prompt_1", "prompt_2", "prompt_3")),
        StepKind("delete_turn", "删掉第 N 轮的回复（chat.delete：后面的轮次都在；盖住它的摘要作废并重写）",
                 required={"chat": is_str, "turn": is_int},
                 files=("change", "prompt_1", "prompt_2", "prompt_3")),
        StepKind("recall", "按用户原话召回向量记忆（只取当前分支；只演示召回这一层）",
                 required={"chat": is_str, "query": is_str}, files=("recall", "trace", "hidden")),
        StepKind("discussion", "agent 讨论：按真实用量压缩讨论区（只演示讨论压缩这一层）",
                 required={"chat": is_str},
                 optional={"context_window": is_int, "reserve": is_int, "keep_recent": is_int,
                           "input_max_chars": is_int},
                 files=("prompt", "summary", "history", "outcome")),
        StepKind("generic_compact", "在我们每次剧情压缩的同一时刻、同一分支上，跑一次通用 agent 压缩作对照",
                 required={"chat": is_str},
                 optional={"keep_recent_tokens": is_int, "reserve": is_int},
                 files=tuple(f"{key}_{n}" for n in (1, 2, 3)
                             for key in ("prompt", "prefix_prompt", "cut", "ours", "summary"))),
        StepKind("import_card",
                 "导入角色卡或设定集文件（Card.import_card）：V2/V3 的 JSON、PNG、CHARX，lorebook_v3，世界书",
                 required={"file": is_str}, chat_params=(), files=("book", "card")),
        StepKind("lore_play", "逐轮演（prepare / record），记下每轮设定集激活了什么",
                 required={"chat": is_str}, optional={"upto": is_int},
                 files=("log", "prompt_1", "prompt_2", "prompt_3", "summary_1", "summary_2", "summary_3")),
        StepKind("lore_turn", "新的一条消息，看 chat.preview 带设定集组装的上下文和这一轮的记录",
                 required={"chat": is_str, "user": is_str},
                 files=("history", "injection", "report", "record")),
        StepKind("pin", "置顶一条事实：给了 chat 就是 chat.pin（只在这一局），没给就是 card.pin（整张卡每一局）",
                 required={"text": is_str}, optional={"chat": is_str}, files=("pins",)),
        StepKind("unpin", "取消一条置顶：chat.unpin 或 card.unpin（按置顶的 id）",
                 required={"pin": is_str}, optional={"chat": is_str}, files=("pins",)),
    )
}
# --8<-- [end:step_kinds]

# ``gold`` (facts the story says or never says, for the scorecard) is validated by
# harness.eval.gold; the run itself ignores it.
_SCENARIO_KEYS = {"name", "title", "description", "card", "user", "char", "language", "config",
                  "chats", "steps", "out", "gold", "source"}
_STEP_COMMON = {"id", "kind", "note", "files", "out"}


@dataclass(frozen=True)
class StepSpec:
    """One step of a scenario."""

    id: str
    kind: str
    out: str
    """Stem of the JSON file under ``sim/out/`` that records this step."""
    params: Mapping[str, Any]
    files: Mapping[str, str]
    """File key (``prompt``; per-chat keys as ``recap:jA``) to file name under ``sim/txt/``."""
    note: str = ""
    """Why the step is there; copied into the JSON record."""


@dataclass(frozen=True)
class Scenario:
    """A whole scenario file."""

    name: str
    title: str
    description: str
    card: str
    user: str
    char: str
    language: str
    config: Mapping[str, Any]
    """The ``config`` mapping as written (recorded in ``out/<name>.json``)."""
    memory_config: MemoryConfig
    """The same settings as the card holds them (:meth:`liyuan.config.MemoryConfig.from_dict`)."""
    chats: Mapping[str, ChatSpec]
    steps: tuple[StepSpec, ...]
    path: str
    """Repository-relative path of the YAML file."""
    source: Mapping[str, Any] | None = None
    """Imported chats: where the chat came from (format, sha256, counts; never a path)."""

    def step(self, step_id: str) -> StepSpec:
        """The step with this id."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


def _files(ctx: Ctx, kind: StepKind, raw: Any, where: str, chats: Mapping[str, ChatSpec]) -> dict[str, str]:
    if raw is None:
        return {}
    data = ctx.mapping(raw, where)
    allowed = set(kind.files) | set(kind.per_chat_files)
    ctx.keys(data, allowed, where)
    out: dict[str, str] = {}

    def name(value: Any, path: str) -> str:
        if not isinstance(value, str) or not _FILE_RE.fullmatch(value):
            raise ctx.fail(path, f"文件名不合法：{value!r}（只写 sim/txt/ 下的文件名，如 summary.txt）")
        return value

    for key, value in data.items():
        if key in kind.per_chat_files:
            per_chat = ctx.mapping(value, f"{where}.{key}")
            for chat_id, file_name in per_chat.items():
                if chat_id not in chats:
                    raise ctx.fail(f"{where}.{key}.{chat_id}", "没有这个局")
                out[f"{key}:{chat_id}"] = name(file_name, f"{where}.{key}.{chat_id}")
        else:
            out[key] = name(value, f"{where}.{key}")
    return out


def _step(ctx: Ctx, raw: Any, index: int, default_out: str, chats: Mapping[str, ChatSpec]) -> StepSpec:
    where = f"steps[{index}]"
    data = ctx.mapping(raw, where)
    step_id = data.get("id")
    if not isinstance(step_id, str) or not ID_RE.fullmatch(step_id):
        raise ctx.fail(f"{where}.id", "每一步都要有 id（字母、数字、- 和 _）")
    where = f"steps[{index}]（{step_id}）"
    kind_name = data.get("kind")
    kind = STEP_KINDS.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        raise ctx.fail(f"{where}.kind", f"未知的步骤类型 {kind_name!r}（可选：{'、'.join(STEP_KINDS)}）")
    params = {k: v for k, v in data.items() if k not in _STEP_COMMON}
    ctx.keys(params, set(kind.required) | set(kind.optional), where)
    for key, check in {**kind.required, **kind.optional}.items():
        if key not in params:
            if key in kind.required:
                raise ctx.fail(f"{where}.{key}", f"{kind.name} 步骤缺少必填字段")
            continue
        if not check(params[key]):
            raise ctx.fail(f"{where}.{key}", f"应该是{TYPE_NAMES.get(check, '合法值')}")
    for key in kind.chat_params:
        if key in params and params[key] not in chats:
            raise ctx.fail(f"{where}.{key}", f"没有这个局：{params[key]!r}（已定义：{'、'.join(chats)}）")
    out = data.get("out", default_out)
    if not isinstance(out, str) or not ID_RE.fullmatch(out):
        raise ctx.fail(f"{where}.out", "应该是 sim/out/ 下 JSON 文件的名字（不带 .json）")
    return StepSpec(
        id=step_id, kind=kind.name, out=out, params=params,
        files=_files(ctx, kind, data.get("files"), f"{where}.files", chats),
        note=ctx.text(data.get("note"), f"{where}.note", optional=True),
    )


def load_scenario(path: Path, root: Path | None = None) -> Scenario:
    """Load and validate one scenario file.

    Args:
        path: The YAML file.
        root: Repository root, to record a relative path (defaults to the file's folder).

    Raises:
        ScenarioError: The file cannot be read or breaks the schema.
    """
    rel = path.relative_to(root).as_posix() if root is not None else path.name
    ctx = Ctx(rel)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except OSError as exc:
        raise ScenarioError(f"{rel}: 读不了这个文件：{exc}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{rel}: YAML 语法错误：{exc}") from exc
    try:
        raw = upgrade_old_keys(raw, rel)
    except ConfigError as exc:
        raise ScenarioError(str(exc)) from exc
    data = ctx.mapping(raw, "（顶层）")
    ctx.keys(data, _SCENARIO_KEYS, "（顶层）")
    name = data.get("name", path.stem)
    if name != path.stem:
        raise ctx.fail("name", f"应该和文件名一致（{path.stem}）")
    config = ctx.mapping(data.get("config") or {}, "config")
    try:
        memory_config = MemoryConfig.from_dict(config)
    except ConfigError as exc:
        raise ctx.fail("config", f"不是合法的记忆设置（liyuan.MemoryConfig）：{exc}") from exc
    chats_raw = ctx.mapping(data.get("chats") or {}, "chats")
    chats = {cid: parse_chat(ctx, cid, c) for cid, c in chats_raw.items()}
    if not chats:
        raise ctx.fail("chats", "至少要有一局")
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise ctx.fail("steps", "应该是非空列表")
    default_out = data.get("out", path.stem)
    steps = tuple(_step(ctx, s, i, default_out, chats) for i, s in enumerate(steps_raw))
    seen_ids: set[str] = set()
    seen_files: dict[str, str] = {}
    for s in steps:
        if s.id in seen_ids:
            raise ctx.fail(f"steps（{s.id}）", "步骤 id 重复")
        seen_ids.add(s.id)
        for file_name in s.files.values():
            if file_name in seen_files:
                raise ctx.fail(f"steps（{s.id}）.files", f"{file_name} 已经由步骤 {seen_files[file_name]} 写了")
            seen_files[file_name] = s.id
    return Scenario(
        name=name,
        title=ctx.text(data.get("title"), "title"),
        description=ctx.text(data.get("description"), "description", optional=True),
        card=ctx.text(data.get("card"), "card"),
        user=ctx.text(data.get("user"), "user"),
        char=ctx.text(data.get("char"), "char"),
        language=ctx.text(data.get("language", "中文"), "language"),
        config=config, memory_config=memory_config, chats=chats, steps=steps, path=rel,
        source=parse_source(ctx, data.get("source")),
    )


def scenario_names(folder: Path) -> list[str]:
    """Names of every scenario in ``folder`` (sorted)."""
    return sorted(p.stem for p in folder.glob("*.yaml"))
