"""Errors raised by liyuan.

The tree separates the caller's mistakes from runtime failures::

    LiyuanError
    ├── ConfigError          a caller's mistake: bad argument, bad chat id, bad config file
    ├── TreeError            a session file that cannot be used at all (not a bad line: those are skipped)
    ├── MemoryFileError      a card-memory file that cannot be read or written safely
    │   └── VersionConflict  a hand edit raced another change (stale version)
    └── ModelError           the side model failed: transport, HTTP status, empty or malformed reply
        └── ModelOutputError the model answered, but the answer does not have the required shape
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "LiyuanError",
    "MemoryFileError",
    "ModelError",
    "ModelOutputError",
    "TreeError",
    "VersionConflict",
]


class LiyuanError(Exception):
    """Base class of every error liyuan raises on purpose."""


class ConfigError(LiyuanError, ValueError):
    """The caller passed something unusable (an unsafe chat id, an invalid option)."""


class TreeError(LiyuanError):
    """A session tree cannot be opened or appended to."""


class MemoryFileError(LiyuanError):
    """A card-memory file cannot be read or written safely."""


class VersionConflict(MemoryFileError):
    """A change was based on a stale version of a memory document."""


class ModelError(LiyuanError):
    """The side model could not produce a reply."""


class ModelOutputError(ModelError):
    """The side model replied, but the reply is unusable (empty, missing sections, no marks)."""
