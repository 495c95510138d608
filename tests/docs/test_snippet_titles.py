"""The 模版 title hook: line spans, refusals, and agreement with pymdownx.snippets itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import markdown
import pytest

from .hook import ROOT, load_hook

hook = load_hook()

SOURCE = textwrap.dedent(
    """\
    import os


    # --8<-- [start:outer]
    def outer() -> int:
        # --8<-- [start:inner]
        value = 1
        # --8<-- [end:inner]
        return value
    # --8<-- [end:outer]


    class Box:
        # --8<-- [start:method]
        def method(self) -> None:
            pass
        # --8<-- [end:method]

    # --8<-- [start:blank]

    # --8<-- [end:blank]
    # --8<-- [start:open]
    tail = True
    """
)

TEMPLATE = "第一行 {{ name }}\n{# --8<-- [start:rule] #}\n规则那一行\n{# --8<-- [end:rule] #}\n最后一行\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "pkg" / "p.j2").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "sim.txt").write_text("一\n二\n三\n", encoding="utf-8")
    return tmp_path


def snippets_render(spec: str, root: Path) -> list[str]:
    """What pymdownx.snippets itself puts in place of ``--8<-- "spec"`` (the oracle)."""
    md = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={"pymdownx.snippets": {
            "base_path": [str(root)], "check_paths": True, "dedent_subsections": True,
        }},
    )
    lines: list[str] = md.preprocessors["snippet"].run([f'--8<-- "{spec}"'])
    while lines and not lines[-1].strip():
        lines.pop()  # a whole file ending in a newline yields a final empty line
    return lines


def file_lines(root: Path, rel: str, start: int, end: int) -> list[str]:
    return (root / rel).read_text(encoding="utf-8").splitlines()[start - 1 : end]


# -- resolve ------------------------------------------------------------------------

def test_named_section_spans_the_lines_between_its_markers(repo: Path) -> None:
    include = hook.resolve("pkg/mod.py:outer", repo)
    assert (include.start, include.end) == (5, 9)
    assert file_lines(repo, "pkg/mod.py", 5, 5) == ["def outer() -> int:"]
    assert file_lines(repo, "pkg/mod.py", 9, 9) == ["    return value"]
    # The nested section's markers are not part of what renders.
    assert list(include.lines) == ["def outer() -> int:", "    value = 1", "    return value"]
    assert hook.format_title(include) == "模版 · pkg/mod.py:5-9"


def test_indented_section_is_dedented_like_snippets_does(repo: Path) -> None:
    include = hook.resolve("pkg/mod.py:method", repo)
    assert (include.start, include.end) == (15, 16)
    assert include.lines == ("def method(self) -> None:", "    pass")


def test_whole_file_spans_every_line_and_drops_marker_lines(repo: Path) -> None:
    include = hook.resolve("pkg/p.j2", repo)
    assert (include.start, include.end) == (1, 5)
    assert include.lines == ("第一行 {{ name }}", "规则那一行", "最后一行")
    assert hook.format_title(include) == "模版 · pkg/p.j2:1-5"


def test_single_line_title_has_one_number(repo: Path) -> None:
    include = hook.resolve("pkg/p.j2:rule", repo)
    assert (include.start, include.end) == (3, 3)
    assert hook.format_title(include) == "模版 · pkg/p.j2:3"


def test_line_range_within_the_file(repo: Path) -> None:
    include = hook.resolve("sim.txt:2:3", repo)
    assert (include.start, include.end, include.lines) == (2, 3, ("二", "三"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pkg/nope.py", "不存在"),
        ("pkg/mod.py:missing", r"没有 \[start:missing\]"),
        ("pkg/mod.py:open", r"没有对应的 \[end:open\]"),
        ("pkg/mod.py:blank", "内容为空"),
        ("sim.txt:4:5", "范围越界"),  # snippets would render this as an EMPTY block, exit 0
        ("sim.txt:2:9", "范围越界"),  # snippets would clamp this silently
        ("sim.txt:3:2", "范围无效"),
        ("sim.txt:1:2,3:3", "不支持"),
        ("../outside.txt", "仓库之外"),
    ],
)
def test_refuses_includes_that_would_render_wrong(repo: Path, spec: str, message: str) -> None:
    (repo.parent / "outside.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(hook.IncludeError, match=message):
        hook.resolve(spec, repo)


@pytest.mark.parametrize("spec", ["pkg/mod.py:outer", "pkg/mod.py:method", "pkg/mod.py:inner",
                                  "pkg/p.j2", "pkg/p.j2:rule", "sim.txt", "sim.txt:2:3"])
def test_resolved_lines_equal_what_snippets_renders(repo: Path, spec: str) -> None:
    include = hook.resolve(spec, repo)
    assert list(include.lines) == snippets_render(spec, repo)
    if ":" in spec and not spec.endswith(".j2"):
        # For sections and ranges the span is exactly the rendered lines (before dedent).
        raw = file_lines(repo, include.path, include.start, include.end)
        assert [line.strip() for line in raw if "--8<--" not in line] == [line.strip() for line in include.lines]


# -- rewrite_titles -------------------------------------------------------------------

def test_template_fences_get_generated_titles_even_inside_blocks(repo: Path) -> None:
    page = textwrap.dedent(
        """\
        ```python title="模版"
        --8<-- "pkg/mod.py:outer"
        ```

        ??? abstract "长模版"

            ``` jinja title="模版" linenums="1"
            --8<-- "pkg/p.j2"
            ```

        ```text title="效果 · 别的标题"
        --8<-- "sim.txt"
        ```
        """
    )
    out = hook.rewrite_titles(page, repo)
    assert '```python title="模版 · pkg/mod.py:5-9"' in out
    assert '    ``` jinja title="模版 · pkg/p.j2:1-5" linenums="1"' in out
    assert '```text title="效果 · 别的标题"' in out
    assert out.count("--8<--") == page.count("--8<--")


def test_hand_typed_template_title_is_refused(repo: Path) -> None:
    page = '```python title="模版 · pkg/mod.py:1-3"\n--8<-- "pkg/mod.py:outer"\n```\n'
    with pytest.raises(hook.IncludeError, match="不能手写"):
        hook.rewrite_titles(page, repo)


@pytest.mark.parametrize("body", ['--8<-- "pkg/mod.py:outer"\n--8<-- "pkg/p.j2"', "print('typed by hand')", ""])
def test_template_fence_must_hold_exactly_one_snippet(repo: Path, body: str) -> None:
    page = f'```python title="模版"\n{body}\n```\n'
    with pytest.raises(hook.IncludeError, match="只能有一行"):
        hook.rewrite_titles(page, repo)


def test_every_snippet_line_is_checked_not_only_templates(repo: Path) -> None:
    page = '??? abstract "效果"\n\n    ```text\n    --8<-- "sim.txt:7:9"\n    ```\n'
    with pytest.raises(hook.IncludeError, match="范围越界"):
        hook.rewrite_titles(page, repo)


def test_escaped_snippet_lines_are_left_alone(repo: Path) -> None:
    page = '```text\n;--8<-- "pkg/missing.py"\n```\n'
    assert hook.rewrite_titles(page, repo) == page


def test_unclosed_fence_is_an_error(repo: Path) -> None:
    with pytest.raises(hook.IncludeError, match="没有结束"):
        hook.rewrite_titles('```python title="模版"\n--8<-- "pkg/mod.py:outer"\n', repo)


# -- the real pages -------------------------------------------------------------------

PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_include_on_every_page_resolves_to_what_snippets_renders(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    hook.rewrite_titles(text, ROOT)  # raises on a missing, empty or out-of-range include
    for spec in dict.fromkeys(hook.iter_snippet_lines(text)):
        # The lines the title's span describes are the lines the page shows.
        assert list(hook.resolve(spec, ROOT).lines) == snippets_render(spec, ROOT), spec


def test_no_page_types_a_template_title_by_hand() -> None:
    for page in PAGES:
        assert 'title="模版 ·' not in page.read_text(encoding="utf-8"), page.name


def test_hl_names_lines_by_their_text_and_becomes_hl_lines(repo: Path) -> None:
    page = '```python title="模版" hl="value = 1|return"\n--8<-- "pkg/mod.py:outer"\n```\n'
    out = hook.rewrite_titles(page, repo)
    # outer renders: def outer, value = 1, return value (markers dropped) -> lines 2 and 3.
    assert out.splitlines()[0] == '```python title="模版 · pkg/mod.py:5-9" hl_lines="2 3"'


@pytest.mark.parametrize(("info", "message"), [
    ('hl="no such text"', "不在引入的行里"),
    ('hl="value|"', "空的一项"),
    ('hl_lines="1"', "不能手写 hl_lines"),
])
def test_hl_that_points_nowhere_or_is_typed_is_refused(repo: Path, info: str, message: str) -> None:
    page = f'```python title="模版" {info}\n--8<-- "pkg/mod.py:outer"\n```\n'
    with pytest.raises(hook.IncludeError, match=message):
        hook.rewrite_titles(page, repo)
