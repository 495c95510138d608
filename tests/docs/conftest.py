"""One strict build of the site per test session, shared by the docs tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .hook import ROOT


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of the real pages and artifacts into a temporary folder."""
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    return site
