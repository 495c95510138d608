"""The import benchmark (``python -m harness bench --only import``).

A generated 5,000-message SillyTavern chat (the bookshop fixture's lines, cycled and
numbered, with a swipe on every tenth reply and a narrator message every hundred
messages) is imported three ways and timed:

- ``python -m harness import`` into a scenario (:func:`harness.importer.import_file`);
- :func:`liyuan.session.imports.import_chat` into a new session tree, on disk (the
  temporary file fsynced once before it is linked into place);
- ``python -m harness run`` of that scenario with the scripted model (placeholder
  replies): every turn written, compaction checked after each, the context assembled,
  the card memory synced.

Targets (a 2-core machine): import under 5 s, the run under 30 s. Nothing here asserts
them; it measures and says plainly whether they were met.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.imports import ChatReader, import_chat

from ..importer import import_file
from ..running.models import open_setup
from ..running.progress import Progress
from ..running.runner import run_scenarios

__all__ = ["import_table", "print_import", "write_big_chat"]

FIXTURE = Path(__file__).resolve().parents[2] / "sim" / "imports" / "bookshop.jsonl"
IMPORT_TARGET_S = 5.0
RUN_TARGET_S = 30.0


def write_big_chat(path: Path, messages: int) -> int:
    """Write a SillyTavern chat of about ``messages`` messages; returns how many it holds."""
    rows = [json.loads(line) for line in FIXTURE.read_text("utf-8").splitlines() if line.strip()]
    header, story = rows[0], [r for r in rows[1:] if not r.get("is_system") and not r.get("swipes")]
    users = [r["mes"] for r in story if r.get("is_user")]
    replies = [r["mes"] for r in story if not r.get("is_user")]
    out = [json.dumps(header, ensure_ascii=False)]
    count = 0
    turn = 0
    while count < messages:
        turn += 1
        user = {"name": header["user_name"], "is_user": True, "is_system": False,
                "mes": f"（第 {turn} 夜）{users[turn % len(users)]}"}
        text = f"（第 {turn} 夜）{replies[turn % len(replies)]}"
        reply: dict[str, Any] = {"name": header["character_name"], "is_user": False, "is_system": False, "mes": text}
        if turn % 10 == 0:
            reply.update(swipes=[text, f"（第 {turn} 夜，重来）{replies[(turn + 7) % len(replies)]}"], swipe_id=0)
        out += [json.dumps(user, ensure_ascii=False), json.dumps(reply, ensure_ascii=False)]
        count += 2
        if turn % 50 == 0:
            note = {"name": "旁白", "is_user": False, "is_system": True, "mes": f"——第 {turn} 夜过去了。",
                    "extra": {"type": "narrator"}}
            out.append(json.dumps(note, ensure_ascii=False))
            count += 1
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return count


def import_table(folder: Path, messages: int = 5000, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Generate the chat, import it both ways and run it; the timings."""
    say = progress or (lambda line: None)
    root = folder / "repo"
    (root / "sim" / "scenarios").mkdir(parents=True)
    chat = folder / "big.jsonl"
    count = write_big_chat(chat, messages)
    say(f"导入基准：{count} 条消息，{chat.stat().st_size / 1e6:.1f} MB")
    started = time.perf_counter()
    result = import_file(chat, root=root, out=root / "sim" / "scenarios" / "bigimport.yaml", say=say)
    import_s = time.perf_counter() - started
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="liyuan-import-tree-", dir=folder) as trees:
        import_chat(ChatReader(chat), Path(trees) / "001.jsonl", clock=fixed_clock(), ids=counter_ids("i-"))
    tree_s = time.perf_counter() - started
    say("导入基准：用脚本模型（占位回复）跑一遍记忆 …")
    started = time.perf_counter()
    with open_setup("scripted", root) as setup:
        report = run_scenarios(["bigimport"], root=root, setup=setup, out_base=folder / "out",
                               progress=Progress(quiet=progress is None))
    run_s = time.perf_counter() - started
    steps = report.records.get("bigimport", [])
    play = next((s for s in steps if s["id"] == "play"), {})
    return {
        "messages": count, "turns": result.turns, "swipes": result.source.swipes, "notes": result.source.notes,
        "import_s": round(import_s, 3), "tree_import_s": round(tree_s, 3), "run_s": round(run_s, 3),
        "compactions": len(play.get("outcome", {}).get("compactions", [])), "calls": report.calls,
        "failures": report.failures,
        "targets": {"import_s": IMPORT_TARGET_S, "run_s": RUN_TARGET_S},
    }


def print_import(table: dict[str, Any]) -> None:
    """The table, and whether the targets were met."""
    print(f"\n导入（{table['messages']} 条消息 → {table['turns']} 轮，"
          f"{table['swipes']} 个备选，{table['notes']} 条戏外消息）")
    print(f"  导入成场景（harness import）：{table['import_s']:.2f} s")
    print(f"  导入成会话树（import_chat，落盘，整份文件 fsync 一次）：{table['tree_import_s']:.2f} s")
    print(f"  脚本模型跑一遍记忆（harness run）：{table['run_s']:.2f} s"
          f"（压缩 {table['compactions']} 次，模型调用 {table['calls']} 次）")
    ok_import = table["import_s"] < IMPORT_TARGET_S
    ok_run = table["run_s"] < RUN_TARGET_S and not table["failures"]
    print(f"目标：导入 < {IMPORT_TARGET_S:.0f} s → {'达标' if ok_import else '未达标'}；"
          f"跑一遍 < {RUN_TARGET_S:.0f} s → {'达标' if ok_run else '未达标'}")
    for failure in table["failures"]:
        print(f"  失败：{failure}")
