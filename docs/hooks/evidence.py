"""MkDocs hook: the evidence on the pages, shown the way the seed shows it.

1. **Removed lines are marked.** In a before/after pair written as
   ``<div class="grid compare diff" markdown>`` holding two fences, each with one
   ``--8<--`` line, the left fence gets ``hl_lines`` naming every line of its file that the
   right file no longer has (blank lines aside). The marks come from the two artifacts, so
   they cannot drift from them; a pair whose left side loses nothing is a build error (the
   pair would claim a removal it does not show).
2. **Raw artifacts are files, not page text.** Every ``sim/out/*.json`` is published as a
   file of the site at the same path (``sim/out/memory.json``), so a page links to the JSON
   instead of inlining hundreds of kilobytes of highlighted dump.

3. **Quoted output is run, not copied.** A line ``<!-- 输出: examples/quickstart.py -->``
   becomes a ``text`` block holding what that script prints when the build runs it (in a
   temporary folder, with the repository on ``PYTHONPATH``). A script that fails, or prints
   nothing, fails the build.

4. **Cited tests are links, not English inside Chinese sentences.** A parenthesis holding
   only test names, ``（`test_a`、`test_b`）``, becomes ``（测试 1、2）`` linking to entries of
   the test index; the line ``<!-- 测试索引 -->`` (on the reference page) becomes that index:
   every test the pages cite, with its file and line. A cited test that does not exist
   fails the build.

5. **The scenario list is the scenario files.** The line ``<!-- 场景一览 -->`` becomes a
   table with one row per ``sim/scenarios/*.yaml``: its name, then its own title and
   description with the files its steps write (two columns: a third would not fit a
   phone). A new scenario appears without anyone editing the page.

6. **Long names in table cells may break at their dots, slashes and underscores.** A table's narrowest
   width is its longest unbreakable word; one ``liyuan.discussion.compact.validate_…`` in a
   cell makes a phone's table pan sideways. The built page gets a ``<wbr>`` after every
   ``.``, ``/`` and ``_`` inside code in a table cell (the text and the search index are unchanged),
   so a name wraps between its parts, never inside one.

7. **Code lines are ``<span class="l">``.** pymdownx.highlight gives every source line a
   ``<span id="__span-N-M">`` (docs/assets/extra.css hangs wrapped lines on it). Nothing
   links to those ids, and on the memory page they are 50 KB of its first visit; the built
   page names the line spans by a class instead.

Invariant: page Markdown changes only by the added ``hl_lines`` attribute, the output
blocks, the test links, the test index and the scenario table; the built HTML only by
``<wbr>`` inside code in table cells and the line spans' class.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

__all__ = ["RAW_DIRS", "break_table_names", "mark_removed", "on_files", "on_page_markdown", "on_post_page",
    "removed_lines", "run_outputs", "scenario_table", "script_output", "test_index", "test_links",
    "tests_defined"]

ROOT = Path(__file__).resolve().parents[2]
RAW_DIRS = ("sim/out",)
"""Folders whose JSON files are published as downloadable files."""

_PAIR = re.compile(r'<div class="grid compare diff" markdown>\n(?P<body>.*?)\n</div>', re.S)
_OUTPUT = re.compile(r"^<!-- 输出: (?P<script>[\w/.-]+\.py) -->$", re.M)
_CITED = re.compile(r"（(?P<names>`test_\w+`(?:、`test_\w+`)*)）")
_TEST_INDEX = "<!-- 测试索引 -->"
_SCENARIOS = "<!-- 场景一览 -->"
INDEX_PAGE = "reference.md"
"""The page that holds the test index."""
_FENCE = re.compile(r'^(?P<open>```[^\n]*)\n--8<-- "(?P<path>[^"]+)"\n```', re.M)


def removed_lines(before: str, after: str) -> list[int]:
    """1-based numbers of the non-blank lines of ``before`` that ``after`` does not contain."""
    kept = {line.strip() for line in after.splitlines()}
    return [n for n, line in enumerate(before.splitlines(), 1) if line.strip() and line.strip() not in kept]


def mark_removed(markdown: str, root: Path = ROOT) -> str:
    """Add ``hl_lines`` for the removed lines to the left fence of every diff pair."""

    def pair(match: re.Match[str]) -> str:
        fences = list(_FENCE.finditer(match.group("body")))
        if len(fences) != 2:
            raise ValueError("对照（grid compare diff）里应该正好有两个引用片段的代码块")
        left, right = ((root / f.group("path")).read_text(encoding="utf-8") for f in fences)
        gone = removed_lines(left, right)
        if not gone:
            raise ValueError(f"{fences[0].group('path')} 的行在 {fences[1].group('path')} 里都还在：没有可标的删除")
        first = fences[0]
        marked = f'{first.group("open")} hl_lines="{" ".join(map(str, gone))}"'
        body = match.group("body")
        body = body[:first.start("open")] + marked + body[first.end("open"):]
        return match.group(0).replace(match.group("body"), body)

    return _PAIR.sub(pair, markdown)


def script_output(script: str, root: Path = ROOT) -> str:
    """What ``script`` prints, run with the repository on ``PYTHONPATH`` and a temporary folder as argument."""
    path = root / script
    if not path.is_file():
        raise ValueError(f"找不到脚本 {script}")
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, str(path), folder], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise ValueError(f"{script} 退出码 {done.returncode}，输出 {len(done.stdout)} 字：{done.stderr[-500:]}")
    return done.stdout.rstrip("\n")


def run_outputs(markdown: str, root: Path = ROOT) -> str:
    """Replace every output marker with the script's output as a text block."""
    return _OUTPUT.sub(lambda m: f"```text\n{script_output(m['script'], root)}\n```", markdown)


def tests_defined(root: Path = ROOT) -> dict[str, tuple[str, int]]:
    """Every ``def test_*`` under ``tests/``: name → (file, 1-based line)."""
    found: dict[str, tuple[str, int]] = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = re.match(r"(?:async )?def (test_\w+)", line)
            if match:
                found.setdefault(match.group(1), (path.relative_to(root).as_posix(), number))
    return found


def _anchor(name: str) -> str:
    return "t-" + name.removeprefix("test_").replace("_", "-")


def test_links(markdown: str, src_uri: str, defined: dict[str, tuple[str, int]]) -> str:
    """``（`test_a`、`test_b`）`` → ``（测试 [1](…#t-a)、[2](…#t-b)）`` linking to the index."""
    target = posixpath.relpath(INDEX_PAGE, posixpath.dirname(src_uri) or ".")

    def one(match: re.Match[str]) -> str:
        names = re.findall(r"`(test_\w+)`", match.group("names"))
        missing = [n for n in names if n not in defined]
        if missing:
            raise ValueError(f"页面引用的测试不存在：{'、'.join(missing)}")
        links = "、".join(f'[{i}]({target}#{_anchor(n)} "{n}")' for i, n in enumerate(names, 1))
        return f"（测试 {links}）" if len(names) > 1 else f'（[测试]({target}#{_anchor(names[0])} "{names[0]}")）'

    return _CITED.sub(one, markdown)


def test_index(cited: list[str], defined: dict[str, tuple[str, int]]) -> str:
    """The list of cited tests, each with an anchor, its file and line."""
    rows = []
    for name in sorted(set(cited)):
        path, line = defined[name]
        rows.append(f'- <span id="{_anchor(name)}"></span>`{name}`：`{path}:{line}`')
    return "\n".join(rows)


def _cell(text: str) -> str:
    plain = " ".join(str(text).split())
    return plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _file_names(files: object) -> list[str]:
    """The file names of a step's ``files`` (per-chat keys hold a mapping of chat → name)."""
    if isinstance(files, dict):
        return [n for v in files.values() for n in _file_names(v)]
    return [str(files)] if files else []


def scenario_table(root: Path = ROOT) -> str:
    """One row per scenario file: name, title and description, the files its steps write."""
    rows = ["| 场景 | 演示什么，写出哪些文件 |", "|---|---|"]
    for path in sorted((root / "sim" / "scenarios").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        name = str(data.get("name", path.stem))
        outs: list[str] = []
        txts: list[str] = []
        for step in data.get("steps") or []:
            out = str(step.get("out") or data.get("out") or name)
            if out not in outs:
                outs.append(out)
            txts += [n for n in _file_names(step.get("files") or {}) if n not in txts]
        made = "、".join([*(f"`sim/out/{o}.json`" for o in outs), *(f"`{t}`" for t in txts)])
        rows.append(f"| `{name}` | **{_cell(data.get('title', ''))}**：{_cell(data.get('description', ''))}"
                    f"<br>产物：{made} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before Markdown (and the snippets extension) sees the page."""
    try:
        markdown = run_outputs(mark_removed(markdown))
        if _SCENARIOS in markdown:
            markdown = markdown.replace(_SCENARIOS, scenario_table())
        defined = tests_defined()
        if _TEST_INDEX in markdown:
            docs = Path(config["docs_dir"])
            cited = [n for page in sorted(docs.rglob("*.md"))
                     for m in _CITED.finditer(page.read_text(encoding="utf-8"))
                     for n in re.findall(r"`(test_\w+)`", m.group("names"))]
            markdown = markdown.replace(_TEST_INDEX, test_index(cited, defined))
        return test_links(markdown, page.file.src_uri, defined)
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        raise PluginError(f"{page.file.src_uri}: {error}") from error


_CELL = re.compile(r"<td[^>]*>.*?</td>", re.S)
_CELL_CODE = re.compile(r"<code>([^<]+)</code>")


def break_table_names(html: str) -> str:
    """A ``<wbr>`` after each ``.``, ``/`` and ``_`` of code inside table cells (not at its ends)."""

    def code(match: re.Match[str]) -> str:
        text = match.group(1)
        return "<code>" + re.sub(r"(?<=[./_])(?=[^\s./_])", "<wbr>", text) + "</code>"

    return _CELL.sub(lambda cell: _CELL_CODE.sub(code, cell.group(0)), html)


_LINE_SPAN = re.compile(r'<span id="__span-\d+-\d+">')


def on_post_page(output: str, /, *, page: Any, config: Any) -> str:
    """MkDocs event: the page's final HTML, after the search plugin has read it."""
    return _LINE_SPAN.sub('<span class="l">', break_table_names(output))


def on_files(files: Files, /, *, config: Any) -> Files:
    """MkDocs event: publish the raw artifacts as files at their repository paths."""
    for folder in RAW_DIRS:
        for path in sorted((ROOT / folder).glob("*.json")):
            files.append(File(f"{folder}/{path.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))
    return files
