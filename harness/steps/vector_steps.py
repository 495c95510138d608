"""Vector memory in a scenario: archive on compaction, ingest per beat, recall per turn.

Invariant: the harness uses the library's own seams only (``archive_compacted`` as the
compaction's archive callback, which passes the anchor; ``ingest_beat`` after a beat;
``recall_for_beat`` for the 【剧情记忆】 lines), with the hashing embedder, which needs
no model files and gives the same vectors on every machine, so recalled lines are
byte-stable.
"""

from __future__ import annotations

from collections.abc import Callable

from liyuan.errors import ConfigError
from liyuan.session.entries import Entry
from liyuan.session.tree import SessionTree
from liyuan.vector import (
    SqliteChunkStore,
    VectorConfig,
    VectorMemory,
    branch_ids_of,
    on_current_branch,
    recall_for_beat,
)

from ..run_state import ScenarioRun, StepResult, handler
from ..scenario import StepSpec

__all__ = ["VectorAdapter", "vector_for"]

STORE_FILE = "向量记忆.sqlite"


class VectorAdapter:
    """One chat's vector memory inside a scenario run."""

    def __init__(self, run: ScenarioRun, chat_id: str) -> None:
        folder = run.chat_dir(chat_id)
        self.memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"),
                                   SqliteChunkStore(folder / STORE_FILE, clock=run.clock))

    def ingest_turn(self, tree: SessionTree, reply: Entry) -> None:
        """After a finished beat: ingest its reply, tagged with the beat's entry id."""
        self.memory.ingest_beat(reply.text, node_id=reply.id, branch_ids=branch_ids_of(tree.branch()))

    def recall(self, query: str, tree: SessionTree, on_warning: Callable[[str], None]) -> list[str]:
        """The 【剧情记忆】 lines for this query on the current branch."""
        return recall_for_beat(self.memory, query, branch_ids_of(tree.branch()), warn=on_warning)


def vector_for(run: ScenarioRun, chat_id: str) -> VectorAdapter | None:
    """The chat's vector memory when the scenario turns it on (``config.vector``), else ``None``."""
    if not run.config("vector", False):
        return None
    key = f"vector:{chat_id}"
    if key not in run.services:
        run.services[key] = VectorAdapter(run, chat_id)
    adapter: VectorAdapter = run.services[key]
    return adapter


@handler("recall")
def recall(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Recall for a query on the current branch; records every visible and hidden chunk."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    adapter = vector_for(run, chat_id)
    if adapter is None:
        raise ConfigError(f"{step.id}: recall 需要在场景 config 里打开 vector")
    warnings: list[str] = []
    branch = branch_ids_of(tree.branch())
    lines = recall_for_beat(adapter.memory, step.params["query"], branch, warn=warnings.append)
    chunks = adapter.memory.list_chunks()
    hidden = [c for c in chunks if not on_current_branch(c, branch)]
    run.write_txt("recall", "\n".join(lines) if lines else "（没有召回任何内容：不出【剧情记忆】这一块）")
    run.write_txt("hidden", "\n\n".join(
        f"===== 块 · 写于 {c.node_id}（不在当前分支上，召回时隐藏）=====\n{c.text.strip()}" for c in hidden)
        if hidden else "（库里没有不在当前分支上的块）")
    return StepResult({"query": step.params["query"], "lines": lines, "warnings": warnings,
                       "chunks_total": len(chunks),
                       "chunks_off_branch": [{"node_id": c.node_id, "text_head": c.text[:40]} for c in hidden]},
                      f"召回 {len(lines)} 行；{len(hidden)} 段因不在当前分支而隐藏")
