"""One strict build of the site per test session, shared by the docs tests."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from .hook import ROOT


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of the real pages and artifacts into a temporary folder.

    Built the way ``nox -s docs`` builds it: the environment's ``mkdocs`` script, whose
    ``sys.path`` does not hold the checkout (``python -m mkdocs`` would add the working
    directory and hide a hook that imports the uninstalled harness). Where the library is
    installed (as nox installs it) ``PYTHONPATH`` is dropped too.
    """
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    if _installed("liyuan-memory"):
        env.pop("PYTHONPATH", None)
    script = Path(sysconfig.get_path("scripts")) / "mkdocs"
    assert script.exists(), f"{script} is missing: the docs extra installs it"
    result = subprocess.run(
        [str(script), "build", "--strict", "-d", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    return site


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
