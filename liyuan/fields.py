"""Checks of the settings objects' fields (``MemoryConfig``, ``VectorConfig``, ``StoreConfig``).

A value built in code is refused at construction with a Chinese :class:`ConfigError`
naming the field; the file readers clamp or refuse before they construct. ``bool`` is an
``int`` to Python, but ``keep=True`` is a mistake, never a number, and ``1`` is not a
switch: both are refused.
"""

from __future__ import annotations

from liyuan.errors import ConfigError

__all__ = ["check_int", "check_type"]


def check_type(name: str, value: object, kind: type) -> None:
    """Refuse ``value`` unless it is a ``kind`` (a ``bool`` passes only for ``bool``)."""
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{name} 类型不对：应为 {kind.__name__}，实际是 {value!r}")


def check_int(name: str, value: object, low: int, high: int | None = None) -> None:
    """Refuse ``value`` unless it is an integer from ``low`` to ``high`` (no upper end: ``None``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} 应为整数，实际是 {value!r}")
    if high is None and value < low:
        raise ConfigError(f"{name} 不能小于 {low}，实际是 {value}")
    if high is not None and not low <= value <= high:
        raise ConfigError(f"{name} 应在 {low} 到 {high} 之间，实际是 {value}")
