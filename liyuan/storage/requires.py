"""The error for a PostgreSQL backend opened without the ``postgres`` extra's packages."""

from __future__ import annotations

from liyuan.errors import ConfigError

__all__ = ["postgres_missing"]


def postgres_missing(exc: ModuleNotFoundError) -> ConfigError:
    """A :class:`ConfigError` naming the missing package and how to install the extra."""
    return ConfigError(f"PostgreSQL 后端需要 {exc.name}（postgres 附加依赖）："
                       "在梨园记忆的仓库目录里运行 pip install '.[postgres]'")
