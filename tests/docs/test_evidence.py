"""The evidence hook, and what the built site publishes (issue 27)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from liyuan import MemoryConfig, config
from liyuan.vector import config as vector_config

from .hook import ROOT, load_hook

hook = load_hook("evidence")


def test_the_removed_lines_are_the_before_lines_the_after_side_lacks() -> None:
    assert hook.removed_lines("# t\n\n- a\n- b\n- c\n", "# t\n- a\n- c\n") == [4]


def test_a_diff_pair_marks_its_removed_lines_and_refuses_one_without_removals(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\ny\nz\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("x\nz\n", encoding="utf-8")
    page = ('<div class="grid compare diff" markdown>\n\n```markdown title="前"\n--8<-- "a.txt"\n```\n\n'
            '```markdown title="后"\n--8<-- "{right}"\n```\n\n</div>')
    assert '```markdown title="前" hl_lines="2"\n' in hook.mark_removed(page.replace("{right}", "b.txt"), tmp_path)
    with pytest.raises(ValueError, match="没有可标的删除"):
        hook.mark_removed(page.replace("{right}", "a.txt"), tmp_path)


def test_cited_tests_become_links_to_the_index_and_a_missing_one_is_refused() -> None:
    defined = {"test_a": ("tests/x.py", 3), "test_b": ("tests/y.py", 9)}
    out = hook.test_links("守着（`test_a`、`test_b`）。只有一个（`test_a`）。", "app.md", defined)
    assert out == ('守着（测试 [1](reference.md#t-a "test_a")、[2](reference.md#t-b "test_b")）。'
                   '只有一个（[测试](reference.md#t-a "test_a")）。')
    assert "../reference.md#t-a" in hook.test_links("（`test_a`）", "api/index.md", defined)
    with pytest.raises(ValueError, match="test_c"):
        hook.test_links("（`test_c`）", "app.md", defined)
    assert hook.test_index(["test_b", "test_a"], defined).splitlines()[0] == \
        '- <span id="t-a"></span>`test_a`：`tests/x.py:3`'


def test_the_scenario_table_has_a_row_for_every_scenario_file() -> None:
    table = hook.scenario_table()
    names = sorted(p.stem for p in (ROOT / "sim" / "scenarios").glob("*.yaml"))
    assert len(names) >= 5
    assert [re.match(r"\| `([\w-]+)`", row).group(1) for row in table.splitlines()[2:]] == names  # type: ignore[union-attr]
    for name in names:
        title = yaml.safe_load((ROOT / "sim" / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8"))["title"]
        assert title in table


def test_raw_artifacts_are_files_and_not_page_text(built_site: Path) -> None:
    for path in (ROOT / "sim" / "out").glob("*.json"):
        assert (built_site / "sim" / "out" / path.name).read_bytes() == path.read_bytes()
    memory = (built_site / "memory" / "index.html").read_text(encoding="utf-8")
    assert 'href="../sim/out/memory.json"' in memory
    assert '"calls"' not in memory and "&quot;calls&quot;" not in memory  # no inlined dump


def test_the_sitemap_lists_every_page_under_the_site_url(built_site: Path) -> None:
    sitemap = (built_site / "sitemap.xml").read_text(encoding="utf-8")
    locs = re.findall(r"<loc>([^<]+)</loc>", sitemap)
    pages = [p for p in built_site.rglob("index.html")]
    assert len(locs) == len(pages) > 10
    assert all(loc.startswith(("http://", "https://")) for loc in locs)
    assert '<link rel="canonical"' in (built_site / "memory" / "index.html").read_text(encoding="utf-8")


def _nav_names(items: list[object]) -> list[str]:
    names: list[str] = []
    for item in items:
        if isinstance(item, dict):
            for name, value in item.items():
                names.append(str(name))
                if isinstance(value, list):
                    names += _nav_names(value)
    return names


def test_the_navigation_has_no_two_entries_with_one_name() -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    names = _nav_names(yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader)["nav"])
    assert len(names) > 10 and len(names) == len(set(names)), names


def test_every_setting_has_a_chinese_description_on_the_settings_page(built_site: Path) -> None:
    from dataclasses import fields

    html = (built_site / "settings" / "index.html").read_text(encoding="utf-8")
    tables = ((config, (MemoryConfig,)), (vector_config, (vector_config.VectorConfig, vector_config.StoreConfig,
                                                          vector_config.OpenAIEmbedConfig)))
    for module, classes in tables:
        wanted = {f"{cls.__name__}.{f.name}" for cls in classes for f in fields(cls)}
        assert set(module.DESCRIPTIONS_ZH) == wanted
        for text in module.DESCRIPTIONS_ZH.values():
            shown = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)  # Markdown code, as the page renders it
            assert re.search(r"[\u4e00-\u9fff]", text) and shown in html, text


def test_the_discussion_section_says_discussion_compaction_is_off_by_default() -> None:
    memory = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    section = memory[memory.index("{ #discussion }"):memory.index("{ #split }")]
    assert MemoryConfig().discussion_window == 0
    assert "讨论压缩**默认关闭**" in section and "`discussion_window` 默认是 0" in section


def test_the_harness_page_says_where_a_scenarios_config_keys_come_from() -> None:
    # A scenario's `config` is read by MemoryConfig.from_dict, so its keys are MemoryConfig's
    # fields: the settings page lists every one (checked above); the row must say so.
    from dataclasses import fields

    page = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `config` |"))
    assert "`liyuan.MemoryConfig`" in row and "MemoryConfig.from_dict" in row
    assert "recap_input_max_chars" in {f.name for f in fields(MemoryConfig)} and "`recap_input_max_chars`" in row


def test_the_bench_page_says_lun_not_pai() -> None:
    # 「拍」 was the original's word for a turn; the site says 轮 everywhere.
    bench = json.loads((ROOT / "sim" / "eval" / "bench.json").read_text(encoding="utf-8"))
    assert "拍" not in bench["overhead"]["target"] and "拍" not in (ROOT / "sim" / "eval" / "bench.md").read_text(
        encoding="utf-8")


def test_long_names_in_table_cells_may_break_between_their_parts() -> None:
    html = ("<p><code>a.b</code></p><table><tr><td><code>liyuan.story.scribe.validate_summary</code> and "
            "<code>cards/&lt;卡&gt;/记忆.md</code></td></tr></table>")
    out = hook.break_table_names(html)
    assert "<td><code>liyuan.<wbr>story.<wbr>scribe.<wbr>validate_<wbr>summary</code>" in out
    assert "<code>cards/<wbr>&lt;卡&gt;/<wbr>记忆.<wbr>md</code>" in out
    assert out.startswith("<p><code>a.b</code></p>")  # prose code is left alone


def test_no_page_points_at_a_tracker_the_reader_cannot_see() -> None:
    pages = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md")}
    assert {name: re.findall(r"议题 ?\d*", text) for name, text in pages.items() if "议题" in text} == {}
