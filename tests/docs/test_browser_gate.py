"""The browser test is never skipped quietly: under CI a missing Chromium fails the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from .browser import require_chromium


@pytest.mark.parametrize("ci", ["true", "1", "True"])
def test_a_missing_chromium_fails_under_ci(tmp_path: Path, ci: str) -> None:
    with pytest.raises(pytest.fail.Exception) as info:
        require_chromium(tmp_path / "chromium", {"CI": ci})
    assert "浏览器测试" in str(info.value) and "apt-get install chromium" in str(info.value)


@pytest.mark.parametrize("environ", [{}, {"CI": "false"}, {"CI": ""}])
def test_elsewhere_it_skips_saying_what_did_not_run(tmp_path: Path, environ: dict[str, str]) -> None:
    with pytest.raises(pytest.skip.Exception) as info:
        require_chromium(tmp_path / "chromium", environ)
    assert "没有运行" in str(info.value) and "chromium" in str(info.value)


def test_a_present_chromium_lets_the_test_run(tmp_path: Path) -> None:
    (tmp_path / "chromium").touch()
    require_chromium(tmp_path / "chromium", {"CI": "true"})
