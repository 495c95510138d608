"""``python -m harness`` from the checkout (or with it on the path), or ``python <checkout>/harness``
from any folder: see :mod:`harness.cli`.

Run as a folder, Python puts ``harness/`` itself first on the path and gives this module no
package; the checkout takes that place (so ``harness/compare.py`` cannot shadow anything and
``liyuan`` comes from the same checkout), and the package is imported by its name.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from harness.cli import main

raise SystemExit(main())
