"""Small wording rules a reader noticed (issue 39, item 5), each pinned where it was broken."""

from __future__ import annotations

import re

from .hook import ROOT

DOCS = ROOT / "docs"


def prose(name: str) -> str:
    """A page's Markdown without its code fences (code quotes names as they are)."""
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.sub(r"^([ \t]*)(```|~~~).*?^\1\2[ \t]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def test_deploy_says_lun_not_pai_and_database_not_library() -> None:
    deploy = prose("deploy.md")
    assert "拍" not in deploy
    # 库 alone was both the PostgreSQL database and the library; now it is 数据库 (or 入库, to store)
    rest = deploy.replace("数据库", "").replace("入库", "")
    assert "库" not in rest, [rest[m.start() - 10:m.start() + 5] for m in re.finditer("库", rest)]
    assert "排序本来就在梨园（`liyuan`）里做" in deploy
    # the store table is the included snapshot (sim/eval/stores.md), rendered by harness/eval/figures.py
    assert "排序都在梨园里做" in (ROOT / "sim" / "eval" / "stores.md").read_text(encoding="utf-8")


def test_deploy_and_eval_cite_tests_as_links_not_as_names_in_the_prose() -> None:
    for name in ("deploy.md", "eval.md"):
        text = prose(name)
        cited = re.sub(r"（`test_\w+`(?:、`test_\w+`)*）", "", text)  # the form the evidence hook links
        assert re.findall(r"`(?:tests/\S+|test_\w+)`", cited) == [], name


def test_every_folded_template_says_so_in_its_title() -> None:
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if re.match(r'\?\?\?\+? abstract "', line):
                body = "\n".join(lines[number + 1:number + 4])
                if 'title="模版"' in body:
                    assert '"模版 · ' in line, f"{page.name}:{number + 1}: {line}"


def test_the_facade_docstring_names_every_package() -> None:
    import liyuan

    packages = sorted(p.name for p in (ROOT / "liyuan").iterdir()
                      if (p / "__init__.py").is_file() and p.name not in ("app", "prompts"))
    named = set(re.findall(r":mod:`liyuan\.(\w+)`", liyuan.__doc__ or ""))
    assert [p for p in packages if p not in named] == []
