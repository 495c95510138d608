"""The API reference renders the docstrings' reST: roles become links, ``::`` blocks code (issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

from .hook import load_hook

hook = load_hook("sphinx_roles")
RAW_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|exc|obj):(?:`|<code>)|\w::\s")


def test_a_role_becomes_an_optional_cross_reference_to_the_resolved_name() -> None:
    paths = {"Card": "liyuan.app.card.Card", "sync": "liyuan.app.card.Card.sync"}
    out = hook.convert("Use :class:`Card`, :meth:`sync` and :func:`~liyuan.story.compact.plan`.", paths.get)
    assert '<autoref identifier="liyuan.app.card.Card" optional><code>Card</code></autoref>' in out
    assert '<autoref identifier="liyuan.app.card.Card.sync" optional><code>sync()</code></autoref>' in out
    assert '<autoref identifier="liyuan.story.compact.plan" optional><code>plan()</code></autoref>' in out
    assert ":class:" not in out and ":meth:" not in out


def test_an_explicit_title_and_an_unresolved_name_are_kept() -> None:
    out = hook.convert(":meth:`Card.sync <liyuan.app.card.Card.sync>` and :data:`LIMIT`", lambda _: None)
    assert '<autoref identifier="liyuan.app.card.Card.sync" optional><code>Card.sync</code></autoref>' in out
    assert '<autoref identifier="LIMIT" optional><code>LIMIT</code></autoref>' in out


def test_a_literal_block_becomes_fenced_code_and_a_two_column_listing_a_list() -> None:
    out = hook.literal_blocks("It exports::\n\n    from x import y\n    y()   # call it\n\nAfter.")
    assert "It exports:\n\n```python\nfrom x import y\ny()   # call it\n```" in out and "::" not in out
    listing = hook.literal_blocks("Layout::\n\n    a/b.md       one file\n    a/记忆.md    the handbook\n"
                                  "    a/.x, .y     two locks\n")
    assert "- `a/记忆.md`: the handbook" in listing and "- `a/.x, .y`: two locks" in listing
    assert "```" not in listing


def test_the_built_api_reference_has_no_raw_role_and_links_its_names(built_site: Path) -> None:
    pages = sorted((built_site / "api").rglob("index.html"))
    assert len(pages) >= 7
    raw = {p.parent.name: RAW_ROLE.findall(re.sub(r"<pre>.*?</pre>", "", p.read_text(encoding="utf-8"), flags=re.S))
           for p in pages}
    assert {name: found for name, found in raw.items() if found} == {}
    facade = (built_site / "api" / "index.html").read_text(encoding="utf-8")
    assert facade.count('class="autorefs autorefs-internal"') > 20
    # The facade example is highlighted code, each comment on its own line (no wrap to column 0).
    example = facade[facade.index("An app needs only what this module exports"):][:4000]
    assert 'class="language-python highlight"' in example


def test_the_facade_example_fits_a_phone_line_by_line() -> None:
    # Docstring code has no hanging indent: a line longer than a phone's column wraps to column 0.
    import liyuan

    doc = liyuan.__doc__ or ""
    example = doc[doc.index("exports::") + len("exports::"):doc.index("The packages below")]
    lines = [line.strip() for line in example.splitlines() if line.strip()]
    assert len(lines) > 5 and max(map(len, lines)) <= 38, lines
