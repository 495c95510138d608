"""The ``recall`` step: one layer (vector recall) shown on its own.

Invariant: the chat's vector memory is the one the app's :class:`liyuan.Chat` holds
(archive on compaction and ingest per turn happen inside ``chat.record``); this step
calls the recall a turn makes (:func:`liyuan.app.recall.recall_with_trace`) on it
directly, to list what a query finds, how (the recall trace: which list found each hit,
its rank in each, the fused score) and what the branch filter hides, and its scenario
note says so. The scenario's
``config.vector`` picks the hashing embedder, which needs no model files and gives the
same vectors on every machine, so recalled lines are byte-stable.
"""

from __future__ import annotations

from liyuan.app.recall import recall_with_trace
from liyuan.errors import ConfigError
from liyuan.vector.recall import branch_ids_of
from liyuan.vector.search import on_current_branch

from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from .story_steps import trace_table

__all__: list[str] = []


@handler("recall")
def recall(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Recall for a query on the current branch; records every visible and hidden chunk."""
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    if chat.vector is None:
        raise ConfigError(f"{step.id}: recall 需要在场景 config 里打开 vector")
    warnings: list[str] = []
    branch = branch_ids_of(chat.branch())
    lines, trace = recall_with_trace(chat.vector, step.params["query"], branch, warn=warnings.append)
    chunks = chat.vector.list_chunks()
    hidden = [c for c in chunks if not on_current_branch(c, branch)]
    run.write_txt("recall", "\n".join(lines) if lines else "（没有召回任何内容：不出【剧情记忆】这一块）")
    traced = run.stable_chunks([t.to_json() for t in trace])
    run.write_txt("trace", trace_table(traced) if traced else "（没有命中，没有召回轨迹）")
    run.write_txt("hidden", "\n\n".join(
        f"===== 块 · 写于 {c.node_id}（不在当前分支上，召回时隐藏）=====\n{c.text.strip()}" for c in hidden)
        if hidden else "（库里没有不在当前分支上的块）")
    return StepResult({"query": step.params["query"], "lines": lines, "trace": traced,
                       "warnings": warnings,
                       "chunks_total": len(chunks),
                       "chunks_off_branch": [{"node_id": c.node_id, "text_head": c.text[:40]} for c in hidden]},
                      f"召回 {len(lines)} 行；{len(hidden)} 段因不在当前分支而隐藏")
