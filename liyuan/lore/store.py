"""The lore book on disk: ``cards/<卡>/设定集.yaml``, and the imported card ``角色卡.json``.

Invariants:

- The lore file is YAML a person can read and edit: one block per entry, long texts as
  ``|`` blocks, only the fields that differ from the defaults. It is written atomically
  (temp file, fsync, rename) and read back to an equal book.
- Both files live directly in the card folder; a path that leaves it or passes a
  symlink raises :class:`~liyuan.errors.UnsafePathError` before anything is read or
  written (a card folder may come from someone else).
- A lore file that exists but does not read raises :class:`~liyuan.errors.LoreError`
  naming the file and the entry: a book that half reads must not look like a smaller one.
- What a lore file may expand to is bounded: its YAML aliases are followed on the node
  graph before anything is built, and a file past :data:`MAX_EXPANDED_NODES` nodes or
  :data:`MAX_EXPANDED_CHARS` characters is refused (a LoreError naming the file), so a
  few kilobytes of nested aliases never become gigabytes in memory or in the JSON cache.
- :class:`LoreShelf` reads the file once and again only when its size or mtime changes,
  so a turn costs one ``stat``; the keyword index is built with the book (:class:`LoreIndex`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import yaml

from liyuan import fileio
from liyuan.errors import LoreError, MemoryFileError, UnsafePathError
from liyuan.lore.cards import char_of
from liyuan.lore.match import LoreIndex
from liyuan.lore.model import LoreBook, book_from_dict
from liyuan.lore.provenance import forget_chat

__all__ = ["CACHE_FILE", "CARD_FILE", "LORE_FILE", "LoreShelf", "dump_book", "load_book", "load_card_data",
           "parse_book", "save_book", "save_card_data"]

LORE_FILE = "设定集.yaml"
CARD_FILE = "角色卡.json"
CACHE_FILE = ".设定集.cache.json"
"""The parsed book as JSON, keyed by the sha256 of the YAML it came from: YAML parses ~50×
slower than JSON (4 s against 0.08 s for 10,000 entries), so a big book is parsed once.
Derived, never edited, safe to delete; a cache whose sha256 differs is ignored."""
CACHE_MIN_ENTRIES = 1000
"""Books smaller than this parse fast enough without a cache."""
MAX_EXPANDED_NODES = 5_000_000
"""A lore file may expand to at most this many YAML nodes once its aliases are followed
(a book of 200,000 entries written out in full has about 2 million)."""
MAX_EXPANDED_CHARS = 256_000_000
"""... and to at most this many characters of text (an alias to a long text counts each time)."""

_HEADER = ("# 设定集：这张卡的设定条目，每轮按关键词激活，全文放进【相关设定】，标题列进【设定集索引】。\n"
           "# 可以手改：title 标题、keys 关键词、secondary_keys 次要关键词\n"
           "# （logic：and_any 且含任一、and_all 且全含、not_any 且都不含、not_all 且不全含）、content 正文、\n"
           "# constant 常驻、enabled 启用、priority 优先级（大的先放）、order 顺序（大的先放，预算不够先截小的）、\n"
           "# case_sensitive 区分大小写、whole_word 英文整词、scan_turns 扫描几轮；关键词写成 /模式/标志 才是正则。\n"
           "# {{char}}、{{user}} 原样保留，每轮换成名字；没写的字段取默认值；\n"
           "# extra 里是导入时带来、梨园不用的字段，导出（Card.export_card、export_lore）时原样带回。\n")

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _BlockDumper(_DUMPER):  # type: ignore[misc]
    """Multi-line text as ``|`` blocks, so a person edits prose, not escaped strings."""


def _text(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value and all(ch == "\n" or ch >= " " for ch in value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _text)


def _path(card_dir: Path, name: str) -> Path:
    """``card_dir / name`` if it is not a symlink (the card folder itself may be one).

    The names are fixed file names directly in the card folder, so no ``..`` can occur;
    a symlink in their place could lead anywhere and is refused (as
    :func:`liyuan.card.housekeeping.check_inside` refuses one for the memory files).
    """
    path = card_dir / name
    if path.is_symlink():
        raise UnsafePathError(f"{name} 是符号链接，已拒绝读写：{path}（请换成卡片文件夹里的普通文件）")
    return path


def dump_book(book: LoreBook) -> str:
    """The lore file's text for ``book`` (header comment included)."""
    body = yaml.dump(book.to_dict(), Dumper=_BlockDumper, allow_unicode=True, sort_keys=False, width=100)
    return _HEADER + body


def parse_book(text: str, where: str = LORE_FILE) -> LoreBook:
    """A book from the lore file's text.

    Raises:
        LoreError: Bad YAML or a bad entry (the message names which).
    """
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, where)
        data = loader.construct_document(node) if node is not None else None
        return book_from_dict(data, where)
    except yaml.YAMLError as exc:
        raise LoreError(f"{where} 不是合法的 YAML：{exc}") from None
    except RecursionError:
        raise LoreError(f"{where} 嵌套太深，读不了") from None
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, where: str) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_EXPANDED_NODES` nodes or
    :data:`MAX_EXPANDED_CHARS` characters of text (a "billion laughs" file).

    Counted on the composed node graph, where an alias is the node it names: each distinct
    node is visited once (iteratively, so depth costs no stack), its expanded size summed
    from its children's, so the count itself stays as small as the file.
    """
    sizes: dict[int, tuple[int, int]] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        nodes, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        for child in children:
            nodes, chars = nodes + sizes[id(child)][0], chars + sizes[id(child)][1]
        if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
            raise LoreError(f"{where} 的别名（&锚点 / *引用）展开后太大（超过 {MAX_EXPANDED_NODES:,} 个节点或 "
                            f"{MAX_EXPANDED_CHARS:,} 个字）：不读这个设定集。请去掉层层引用的别名，把内容直接写出来")
        sizes[id(node)] = (nodes, chars)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_book(card_dir: Path) -> LoreBook | None:
    """The card's lore book, or ``None`` when it has none.

    Raises:
        LoreError: The file exists but cannot be read or does not parse.
        UnsafePathError: The path leaves the card folder or passes a symlink.
    """
    path = _path(card_dir, LORE_FILE)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LoreError(f"无法读取设定集 {path}：{exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    cached = _read_cache(card_dir, digest)
    if cached is not None:
        return cached
    book = parse_book(text, str(path))
    _write_cache(card_dir, book, digest)
    return book


def _read_cache(card_dir: Path, digest: str) -> LoreBook | None:
    try:
        raw = json.loads(_path(card_dir, CACHE_FILE).read_text(encoding="utf-8"))
        if isinstance(raw, dict) and raw.get("sha256") == digest:
            return book_from_dict(raw.get("book"))
    except (OSError, ValueError, RecursionError, LoreError, UnsafePathError):
        pass  # a missing, stale or damaged cache: parse the YAML instead
    return None


def _write_cache(card_dir: Path, book: LoreBook, digest: str) -> None:
    if len(book.entries) < CACHE_MIN_ENTRIES:
        return
    try:
        payload = json.dumps({"sha256": digest, "book": book.to_dict()}, ensure_ascii=False)
        fileio.atomic_write_text(_path(card_dir, CACHE_FILE), payload)
    except (OSError, UnsafePathError):
        pass  # a read-only card folder still reads, just without the cache


def save_book(card_dir: Path, book: LoreBook) -> Path:
    """Write the lore file atomically; returns its path.

    Raises:
        LoreError: It cannot be written (the old file stays as it was).
    """
    path = _path(card_dir, LORE_FILE)
    text = dump_book(book)
    try:
        fileio.atomic_write_text(path, text)
    except OSError as exc:
        raise LoreError(f"无法写入设定集 {path}：{exc}") from None
    _write_cache(card_dir, book, hashlib.sha256(text.encode("utf-8")).hexdigest())
    return path


def save_card_data(card_dir: Path, card: dict[str, Any]) -> Path:
    """Write the imported card (every field as it came, lore included) as ``角色卡.json``."""
    path = _path(card_dir, CARD_FILE)
    try:
        fileio.atomic_write_text(path, json.dumps(card, ensure_ascii=False, indent=2) + "\n")
    except OSError as exc:
        raise LoreError(f"无法写入角色卡 {path}：{exc}") from None
    return path


def load_card_data(card_dir: Path) -> dict[str, Any] | None:
    """The imported card as stored, or ``None`` when the card was not imported.

    Raises:
        LoreError: The file exists but is not a JSON object.
    """
    path = _path(card_dir, CARD_FILE)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise LoreError(f"无法读取角色卡 {path}：{exc}") from None
    if not isinstance(data, dict):
        raise LoreError(f"角色卡 {path} 应为 JSON 对象")
    return data


class LoreShelf:
    """The card's lore book and its keyword index, re-read only when the file changes."""

    def __init__(self, card_dir: Path, names: tuple[str, str] | None = None) -> None:
        self.card_dir = card_dir
        self._names = names
        """The user's and the character's name the card was opened with (see :meth:`names`)."""
        self._card_char: str | None = None
        """The imported card's nickname or name ("": none), read once (:meth:`card_replaced`)."""
        self._stamp: tuple[int, int, tuple[str, str] | None] | None = None
        self._index: LoreIndex | None = None
        self._guard = threading.Lock()

    def index(self) -> LoreIndex | None:
        """The current book's index, or ``None`` when the card has no lore book.

        Raises:
            LoreError: The file does not read (the previous book is not used instead).
        """
        path = _path(self.card_dir, LORE_FILE)
        try:
            stat = path.stat()
        except FileNotFoundError:
            with self._guard:
                self._stamp, self._index = None, None
            return None
        except OSError as exc:
            raise LoreError(f"无法读取设定集 {path}：{exc}") from None
        names = self.names()
        stamp = (stat.st_mtime_ns, stat.st_size, names)
        with self._guard:
            if stamp != self._stamp or self._index is None:
                book = load_book(self.card_dir)
                self._index = LoreIndex(book, names) if book is not None else None
                self._stamp = stamp
            return self._index

    def names(self) -> tuple[str, str] | None:
        """What the book's ``{{user}}`` and ``{{char}}`` stand for: the names given, the
        character's replaced by the imported card's nickname or name (``None``: no names given)."""
        if self._names is None:
            return None
        if self._card_char is None:
            try:
                data = load_card_data(self.card_dir)
            except MemoryFileError:
                data = None
            inner = data.get("data") if isinstance(data, dict) and isinstance(data.get("data"), dict) else data
            self._card_char = char_of(inner) if isinstance(inner, dict) else ""
        return self._names[0], self._card_char or self._names[1]

    def card_replaced(self) -> None:
        """The imported card changed: :meth:`names` reads it again."""
        self._card_char = None

    def forget_chat(self, chat_id: str) -> list[str]:
        """Take ``chat_id`` out of every entry's sources and save; the titles only it supported.

        Nothing is written when no entry names the chat (:func:`liyuan.lore.provenance.forget_chat`).
        """
        index = self.index()
        if index is None or not any(chat_id in entry.sources for entry in index.book.entries):
            return []
        kept, removed = forget_chat(index.book, chat_id)
        self.save(kept)
        return removed

    def save(self, book: LoreBook) -> None:
        """Write ``book`` and index it (the next :meth:`index` uses it)."""
        with self._guard:
            save_book(self.card_dir, book)
            self._stamp, self._index = None, None

    def restore(self, data: bytes | None) -> None:
        """Put the lore file back as ``data`` (``None``: it did not exist), undoing a :meth:`save`."""
        with self._guard:
            path = _path(self.card_dir, LORE_FILE)
            if data is None:
                path.unlink(missing_ok=True)
            else:
                fileio.atomic_write_bytes(path, data)
            self._stamp, self._index = None, None
