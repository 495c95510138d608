"""The CJK line-joining hook: joins wrapped Chinese prose, never changes structure."""

from __future__ import annotations

import re
import textwrap

import markdown

from .hook import ROOT, load_hook

join = load_hook("cjk_lines").join_cjk_lines

EXTENSIONS = ["admonition", "tables", "pymdownx.superfences", "md_in_html"]


def render(text: str) -> str:
    return markdown.markdown(text, extensions=EXTENSIONS)


def test_wrapped_chinese_paragraph_renders_without_a_space() -> None:
    page = "树上多出一个分叉；\n旧的回复还在文件里。\n"
    assert join(page) == "树上多出一个分叉；旧的回复还在文件里。\n"
    assert "分叉； 旧" not in render(join(page))
    assert "分叉；\n旧" in render(page)  # without the hook the break (a space) stays


def test_indented_continuations_in_lists_and_admonitions_join() -> None:
    page = textwrap.dedent(
        """\
        - 第一条说到一半，
          接着说完。

        !!! info "标题"
            第一行，
            第二行。
        """
    )
    assert join(page) == textwrap.dedent(
        """\
        - 第一条说到一半，接着说完。

        !!! info "标题"
            第一行，第二行。
        """
    )


def test_structure_is_never_touched() -> None:
    page = textwrap.dedent(
        """\
        ## 标题
        正文紧跟在标题下面。

        | 列 | 说明 |
        |---|---|
        | 一 | 二 |
        表格后面的话。

        ```text
        代码里的换行，
        必须原样保留。
        ```

        ??? abstract "长块"
            内容。

        英文结尾 end
        中文开头的下一行。

        中文结尾的一行。
        - 列表项不会被并上来
        --8<-- "sim/txt/summary.txt"
        """
    )
    assert join(page) == page
    assert render(join(page)) == render(page)


def test_the_real_pages_keep_their_structure() -> None:
    tag = re.compile(r"<(/?[a-z0-9]+)")
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        # The same elements in the same order: only the text inside them may change.
        assert tag.findall(render(join(text))) == tag.findall(render(text)), page.name
