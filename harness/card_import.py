"""``python -m harness import CARD``: a character card or lore book becomes a scenario.

:mod:`harness.importer` hands a file here when it is a card (PNG, CHARX, or JSON whose
``spec`` is a card or ``lorebook_v3``, or a SillyTavern World Info file). The file is read
with :func:`liyuan.lore.cards.read_card` first; a file it refuses is refused here with the
same Chinese message, and nothing is written. Otherwise the file is copied unchanged to
``sim/cards/`` (named by its sha256, so a second import of the same bytes changes
nothing) and ``sim/scenarios/card-<sha8>.yaml`` is written: import the card, open a chat
with its first greeting, assemble a turn with its lore book (【相关设定】 and
【设定集索引】). Both files are written atomically; the scenario is checked to load first.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from liyuan.fileio import atomic_write_bytes, atomic_write_text
from liyuan.lore.cards import ImportedCard, read_card
from liyuan.lore.containers import PNG_SIGNATURE

from .running.replies import dump_yaml
from .running.scenario import load_scenario

__all__ = ["CARD_USER", "import_card_file", "looks_like_card"]

CARD_USER = "（框架补的一条用户消息：角色卡刚导入，用它看第一轮带着设定集组装出的上下文）"


def looks_like_card(path: Path) -> bool:
    """A PNG, a zip, or a JSON card / lore book (a chat file is none of these)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError:
        return False
    if head.startswith(PNG_SIGNATURE) or head.startswith(b"PK\x03\x04"):
        return True
    if not head.lstrip().startswith(b"{"):
        return False
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(raw, dict):
        return False
    return raw.get("spec") in ("chara_card_v2", "chara_card_v3", "lorebook_v3") or (
        isinstance(raw.get("entries"), dict) and "messages" not in raw)


def _scenario(name: str, card_rel: str, card: ImportedCard, user: str) -> dict[str, Any]:
    char = card.name or "角色"
    chat: dict[str, Any] = {"name": f"和{char}的第一局" if card.name else "设定集试用",
                            "note": f"从 {card.kind}（{card.container}）导入；开场白是卡里的第一句"}
    if card.greetings:
        chat["greeting"] = card.greetings[0]
    stem = name
    return {
        "name": name,
        "title": f"导入的角色卡：{char}",
        "description": "导入角色卡（或设定集），用它的开场白开一局，带着设定集组装第一轮的上下文。",
        "card": char,
        "user": user,
        "char": char,
        "language": "中文",
        "chats": {"first": chat},
        "steps": [
            {"id": "import-card", "kind": "import_card", "file": card_rel,
             "note": "用 Card.import_card 导入：整张卡存成 角色卡.json，设定集写成卡目录里的 设定集.yaml。",
             "files": {"book": f"{stem}-book.txt", "card": f"{stem}-card.txt"}},
            {"id": "first-turn", "kind": "lore_turn", "chat": "first", "user": CARD_USER,
             "note": "第一轮：新消息和开场白激活设定，全文进【相关设定】，其余标题进【设定集索引】。",
             "files": {"injection": f"{stem}-tail.txt", "report": f"{stem}-report.txt"}},
        ],
    }


def import_card_file(path: Path, *, root: Path, user: str | None = None, out: Path | None = None) -> Path:
    """Copy the card into ``sim/cards/`` and write its scenario; returns the scenario's path.

    Raises:
        CardImportError: The file is not a card or lore book that can be imported (nothing written).
    """
    user_name = user or "你"
    card = read_card(path, user_name=user_name)  # refuses bad files before anything is written
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    suffix = {"png": ".png", "charx": ".charx", "json": ".json"}[card.container]
    card_path = root / "sim" / "cards" / f"card-{sha[:8]}{suffix}"
    name = out.stem if out is not None else f"card-{sha[:8]}"
    target = out if out is not None else root / "sim" / "scenarios" / f"{name}.yaml"
    origin = f"{card.kind}（{card.container}）"
    text = (f"# 导入的角色卡：由 python -m harness import 从 {origin} 生成（sha256 {sha[:12]}…）。\n"
            + dump_yaml(_scenario(name, card_path.relative_to(root).as_posix(), card, user_name)))
    with tempfile.TemporaryDirectory() as folder:
        check = Path(folder) / f"{name}.yaml"
        check.write_text(text, encoding="utf-8")
        load_scenario(check)
    atomic_write_bytes(card_path, data)
    atomic_write_text(target, text)
    return target
