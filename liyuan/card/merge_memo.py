"""A refused merge is never paid for twice on the same inputs.

When :func:`liyuan.card.merge_check.check_merge` refuses a merge reply, the manifest
keeps what the merge was built from (:func:`merge_inputs`, a sha1) and why it was
refused (:class:`~liyuan.card.manifest.RefusedMerge`). A later sync whose merge would be
built from exactly the same inputs does not call the side model: it says why the last
reply was refused and what would change the inputs (a chat that moves on, a hand edit,
a deletion), or that ``resume_merging()`` asks for one more attempt. A merge that is
written clears the memo.

Invariant: pure bookkeeping, no model call; the memo is written under the card's write
lock, with the manifest.
"""

from __future__ import annotations

import hashlib
import json

from liyuan.card.inputs import RecapDiff
from liyuan.card.manifest import RefusedMerge, load_manifest, save_manifest
from liyuan.card.memstore import MemoryStore

__all__ = ["merge_inputs", "refusal_line", "remember_refusal", "unsourced_hint"]


def merge_inputs(handbook: str | None, resident: str | None, diff: RecapDiff, requested: bool) -> str:
    """sha1 of everything one merge call is built from: both aggregates, the batch's recaps
    (ids and text), the chats it forgets, and whether ``resume_merging`` asked for it."""
    body = json.dumps([handbook, resident, [(r.chat_id, r.name, r.text) for r in diff.changed],
                       sorted(diff.deleted), sorted(diff.hashes.items()), requested], ensure_ascii=False)
    return hashlib.sha1(body.encode("utf-8", "surrogatepass")).hexdigest()


def remember_refusal(files: MemoryStore, inputs: str, reason: str) -> None:
    """Keep the refused merge's inputs in the manifest (the caller holds the write lock)."""
    manifest = load_manifest(files)
    manifest.refused_merge = RefusedMerge(inputs, reason)
    save_manifest(files, manifest)


def unsourced_hint(unsourced: bool) -> str:
    """What to do about a handbook without chat blocks, when that is the trouble."""
    return ("；手册里没有任何「来源：局/<id>.md」行：请在手改的手册里给每局补回「# 局：…」块和它的来源行，"
            "或删掉 记忆.md 让下次同步按全部复盘重建") if unsourced else ""


def refusal_line(refused: RefusedMerge, unsourced: bool) -> str:
    """The activity line of a merge not asked again: the reason, and what would change the inputs."""
    return (f"合并记忆暂停：上次在同样的输入上合并结果被拒（{refused.reason}），不再重复请求旁路模型（不再为它付费）；"
            f"有局更新、删掉一局、手改手册或常驻摘要后会再合并，也可以调用 resume_merging() 再试一次"
            f"{unsourced_hint(unsourced)}")
