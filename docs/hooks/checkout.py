"""MkDocs hook: the checkout's own packages are importable while the site builds.

The harness ships in the checkout, not in the wheel (``pip install -e .`` installs
``liyuan`` alone), and some hooks read from it (the 「模型对比」 page is built by
:mod:`harness.compare`). ``python -m mkdocs`` has the working directory on ``sys.path``;
the ``mkdocs`` console script, which ``nox -s docs`` and ``nox -s serve`` run, does not.

Invariant: listed first under ``hooks:``, so before any page is read the folder that
holds ``mkdocs.yml`` is on ``sys.path`` (once, at the front), whichever way mkdocs was started.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["on_config"]


def on_config(config: Any) -> Any:
    """Put the checkout (the folder of ``mkdocs.yml``) first on ``sys.path``."""
    root = str(Path(config["config_file_path"]).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return config
