"""The package as an app developer gets it: built, installed (not editable) into a fresh venv in a
temporary folder outside the checkout, and the app page's quickstart run there with the shipped
test double (``liyuan.testing``).

Quick and mostly offline: the wheel is built by pip with build isolation (setuptools from the
configured index, cached after the first time); the fresh venv is made without pip and the wheel
goes in with ``pip --python <venv> install --no-deps``; the dependencies (openai, jinja2, pyyaml)
are lent by this test run's own environment through a path line in the venv, so nothing of the
checkout (its folder, an editable install) can be imported by mistake: the test checks where
``liyuan`` came from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What a wheel is built from; the rest of the checkout (site, sim, tests, caches) stays behind.
LEFT_OUT = {".git", ".nox", ".venv", "site", "sim", "docs", "tests", "build", "dist", "__pycache__",
            ".pytest_cache", ".mypy_cache", ".ruff_cache", "test-output"}


def _run(*command: str | Path, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in LEFT_OUT or n.endswith(".egg-info")}


@pytest.mark.slow
def test_a_non_editable_install_runs_the_quickstart_outside_the_checkout(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_ignore)
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, source, cwd=tmp_path)
    [wheel] = wheels.glob("liyuan_memory-*.whl")

    env_dir = tmp_path / "app" / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel, cwd=tmp_path)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path).strip())
    lent = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    (site / "_lent_dependencies.pth").write_text("\n".join(lent) + "\n", encoding="utf-8")

    app = tmp_path / "app"
    shutil.copy(ROOT / "examples" / "quickstart.py", app / "quickstart.py")
    where = _run(python, "-c", "import liyuan, liyuan.testing; print(liyuan.__file__)", cwd=app).strip()
    assert Path(where).is_relative_to(env_dir), where
    assert not Path(where).is_relative_to(ROOT)

    out = _run(python, "quickstart.py", app / "data", cwd=app)
    assert "前情已压缩" in out and "遗忘 1 局" in out, out
    handbook = (app / "data" / "cards" / "雾港" / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert "来源：局/jA.md" in handbook and "不是模型输出" in handbook
