"""noxfile.py: a missing Python fails loudly, and pyenv's interpreters are found where nox looks."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """noxfile.py imported once (nox warns when a session registers twice), with an empty
    pyenv root and its links in a temporary folder."""
    folder = tmp_path_factory.mktemp("noxfile")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYENV_ROOT", str(folder / "no-pyenv"))
        patch.chdir(folder)
        spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _fake_python(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_missing_interpreter_fails_its_session(noxfile: ModuleType) -> None:
    import nox

    assert nox.options.error_on_missing_interpreters is True


def test_pyenv_pythons_off_path_are_linked_newest_first(noxfile: ModuleType, tmp_path: Path) -> None:
    pyenv = tmp_path / "pyenv"
    for version in ("3.12.1", "3.12.10", "3.12.9"):
        _fake_python(pyenv / "versions" / version / "bin", "python3.12")
    links = tmp_path / "links"
    missing = noxfile.link_pythons(["3.12"], str(tmp_path / "empty-path"), str(pyenv), str(links))
    assert missing == []
    assert os.readlink(links / "python3.12") == str(pyenv / "versions" / "3.12.10" / "bin" / "python3.12")


def test_a_python_found_nowhere_is_named_with_how_to_get_it(noxfile: ModuleType, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    missing = noxfile.link_pythons(["3.13"], str(tmp_path / "empty-path"), str(tmp_path / "pyenv"),
                                   str(tmp_path / "links"))
    assert missing == ["3.13"]
    err = capsys.readouterr().err
    assert "找不到 Python 3.13" in err and "pyenv install 3.13" in err
    assert not (tmp_path / "links" / "python3.13").exists()


def test_a_python_on_path_is_left_alone(noxfile: ModuleType, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _fake_python(bin_dir, "python3.11")
    links = tmp_path / "links"
    assert noxfile.link_pythons(["3.11"], str(bin_dir), str(tmp_path / "pyenv"), str(links)) == []
    assert not links.exists()


def test_the_supported_pythons_are_the_ones_the_package_declares(noxfile: ModuleType) -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'requires-python = ">=3.11"' in text
    assert [noxfile.PYTHON, *noxfile.NEWER_PYTHONS] == ["3.11", "3.12", "3.13"]
    assert sys.version_info >= (3, 11)
