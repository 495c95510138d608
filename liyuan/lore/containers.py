"""Getting a card's JSON out of the files people share: JSON, PNG (``ccv3`` / ``chara``), CHARX.

Written from the Character Card V2 and V3 specifications:

- PNG: the card is a ``tEXt`` chunk whose keyword is ``ccv3`` (V3) or ``chara`` (V2),
  its text the card JSON, UTF-8, base64-encoded. With both, ``ccv3`` is used.
- CHARX: a zip file with ``card.json`` at its root (assets beside it, not extracted here).
- JSON: the card, a ``lorebook_v3`` export or a SillyTavern World Info file as it is.

Invariants: every limit is checked before the bytes are used, and every failure is a
:class:`~liyuan.errors.CardImportError` with a Chinese message; nothing here writes.

- A file over :data:`MAX_FILE_BYTES` is refused from its size, before it is read.
- PNG chunks are walked by their declared lengths; a length past the end of the file
  is refused (a truncated or forged file), as is a file without either keyword.
- CHARX: a member whose name is absolute, climbs with ``..`` or uses a backslash or a
  drive letter is refused (even though nothing is extracted: such an archive is
  malicious); the declared sizes may not exceed :data:`MAX_UNPACKED_BYTES` in total nor
  :data:`MAX_RATIO` times the compressed size; ``card.json`` is read with a hard cap, so
  a header that lies about the size cannot make it read more.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import struct
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from liyuan.errors import CardImportError

__all__ = ["MAX_CARD_JSON_BYTES", "MAX_FILE_BYTES", "MAX_RATIO", "MAX_UNPACKED_BYTES", "Container",
           "png_text_chunks", "read_container"]

MAX_FILE_BYTES = 32 * 1024 * 1024
"""A card file (PNG, CHARX, JSON) larger than this is refused: 32 MiB holds a
100,000-entry lore book as JSON; a portrait needs far less."""
MAX_CARD_JSON_BYTES = 32 * 1024 * 1024
"""The card JSON inside a PNG chunk or a CHARX, decoded."""
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
"""All CHARX members together, as their headers declare them."""
MAX_RATIO = 200
"""A CHARX member may not unpack to more than this many times its compressed size."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

Container = Literal["json", "png", "charx"]


def _size_checked(path: Path) -> bytes:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CardImportError(f"读不了文件 {path.name}：{exc}") from None
    if size > MAX_FILE_BYTES:
        raise CardImportError(f"文件 {path.name} 太大：{size / 1024 / 1024:.1f} MB（上限 "
                              f"{MAX_FILE_BYTES // 1024 // 1024} MB），没有导入")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CardImportError(f"读不了文件 {path.name}：{exc}") from None


def png_text_chunks(data: bytes, name: str = "PNG") -> dict[str, bytes]:
    """The ``tEXt`` chunks of a PNG: keyword to text bytes (the first of each keyword).

    Raises:
        CardImportError: Not a PNG, or a chunk runs past the end of the file.
    """
    if not data.startswith(PNG_SIGNATURE):
        raise CardImportError(f"{name} 不是 PNG 图片（文件头不对）")
    chunks: dict[str, bytes] = {}
    pos = len(PNG_SIGNATURE)
    while pos < len(data):
        if pos + 8 > len(data):
            raise CardImportError(f"{name} 在第 {pos} 字节处被截断（块头不完整）")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        end = pos + 8 + length + 4
        if end > len(data):
            raise CardImportError(f"{name} 的 {kind.decode('latin-1')!r} 块声明 {length} 字节，超出了文件末尾")
        if kind == b"tEXt":
            body = data[pos + 8:pos + 8 + length]
            keyword, sep, text = body.partition(b"\0")
            if sep:
                chunks.setdefault(keyword.decode("latin-1"), text)
        if kind == b"IEND":
            break
        pos = end
    return chunks


def _decode_b64_json(text: bytes, where: str) -> Any:
    try:
        raw = base64.b64decode(b"".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise CardImportError(f"{where} 不是合法的 base64") from None
    if len(raw) > MAX_CARD_JSON_BYTES:
        raise CardImportError(f"{where} 解码后太大（{len(raw)} 字节）")
    return _json(raw, where)


def _json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise CardImportError(f"{where} 不是 UTF-8 文本：{exc}") from None
    except RecursionError:
        raise CardImportError(f"{where} 的 JSON 嵌套太深") from None
    except ValueError as exc:
        raise CardImportError(f"{where} 不是合法的 JSON：{exc}") from None


def _from_png(data: bytes, name: str) -> Any:
    chunks = png_text_chunks(data, name)
    for keyword in ("ccv3", "chara"):  # the spec: with both, ccv3 wins
        if keyword in chunks:
            return _decode_b64_json(chunks[keyword], f"{name} 的 {keyword} 块")
    raise CardImportError(f"{name} 是一张普通图片：没有 ccv3 或 chara 文本块，里面没有角色卡")


def _unsafe_member(member: str) -> bool:
    if "\\" in member or "\0" in member or member.startswith("/") or (len(member) > 1 and member[1] == ":"):
        return True
    return ".." in PurePosixPath(member).parts


def _from_charx(path: Path, name: str) -> Any:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CardImportError(f"{name} 不是合法的 zip（CHARX）文件：{exc}") from None
    with archive:
        infos = archive.infolist()
        total = 0
        for info in infos:
            if _unsafe_member(info.filename):
                raise CardImportError(f"{name} 里有越出包外的路径 {info.filename!r}，这样的包不导入")
            if info.flag_bits & 0x1:
                raise CardImportError(f"{name} 是加密的 zip，不支持")
            total += info.file_size
            if info.file_size > 1024 * 1024 and info.file_size > MAX_RATIO * max(1, info.compress_size):
                raise CardImportError(f"{name} 里的 {info.filename!r} 压缩比异常（{info.compress_size} → "
                                      f"{info.file_size} 字节），疑似 zip 炸弹，没有导入")
        if total > MAX_UNPACKED_BYTES:
            raise CardImportError(f"{name} 解压后共 {total} 字节，超过上限 {MAX_UNPACKED_BYTES}，疑似 zip 炸弹")
        try:
            info = archive.getinfo("card.json")
        except KeyError:
            raise CardImportError(f"{name} 的根目录没有 card.json，不是 CHARX 角色卡") from None
        if info.file_size > MAX_CARD_JSON_BYTES:
            raise CardImportError(f"{name} 的 card.json 太大（{info.file_size} 字节）")
        try:
            with archive.open(info) as handle:
                raw = handle.read(MAX_CARD_JSON_BYTES + 1)  # a lying header cannot make us read more
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError) as exc:
            raise CardImportError(f"{name} 的 card.json 解压失败：{exc}") from None
        if len(raw) > MAX_CARD_JSON_BYTES:
            raise CardImportError(f"{name} 的 card.json 解压后超过上限，疑似 zip 炸弹")
        return _json(raw, f"{name} 的 card.json")


def read_container(path: str | os.PathLike[str]) -> tuple[Container, Any]:
    """The JSON a card file carries, and which kind of file it was.

    Raises:
        CardImportError: See the module docstring.
    """
    path = Path(path)
    data = _size_checked(path)
    name = path.name
    if data.startswith(PNG_SIGNATURE):
        return "png", _from_png(data, name)
    if data.startswith(b"PK\x03\x04") or data.startswith(b"PK\x05\x06"):
        return "charx", _from_charx(path, name)
    if not data.strip():
        raise CardImportError(f"{name} 是空文件")
    return "json", _json(data, name)
