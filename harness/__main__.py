"""``python -m harness``: see :mod:`harness.cli`."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
