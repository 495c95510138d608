"""The template coverage gate: branches found from the templates, and check failing on a hole."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest

import liyuan.prompts
from harness.running.coverage import branches_of
from harness.running.review import check, check_run, diff_run, regenerate
from liyuan.prompts import template_names


def _env(**templates: str) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.DictLoader(templates), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def test_branches_come_from_the_template_ast() -> None:
    env = _env(t="{% if a %}A{% elif b %}B{% else %}C{% endif %}\n{% for x in xs %}{{ x }}{% endfor %}\n"
                 "{% if ys %}{% for y in ys %}{{ y }}{% endfor %}{% endif %}")
    found = branches_of(env, "t")
    got = [(o.line, o.tag, o.branch) for o in found.outcomes]
    assert got == [
        (1, "{% if a %}", "成立"), (1, "{% elif b %}", "成立"), (1, "{% if a %}", "所有条件都不成立"),
        (2, "{% for x in xs %}", "多项（至少两项）"), (2, "{% for x in xs %}", "零项"),
        # Guarded by `{% if ys %}`: zero items is that if's "not taken", not an outcome of its own.
        (3, "{% for y in ys %}", "多项（至少两项）"), (3, "{% if ys %}", "成立"), (3, "{% if ys %}", "不成立"),
    ]


def test_an_instrumented_render_reports_the_outcomes_it_took() -> None:
    env = _env(t="{% if a %}A{% else %}C{% endif %}{% for x in xs %}{{ x }}{% endfor %}")
    found = branches_of(env, "t")
    hits = found.hits({"a": True, "xs": [1, 2]}, "A12")
    assert {o.branch for o in hits} == {"成立", "多项（至少两项）"}
    hits = found.hits({"a": False, "xs": []}, "C")
    assert {o.branch for o in hits} == {"不成立", "零项"}
    with pytest.raises(RuntimeError):
        found.hits({"a": True, "xs": []}, "something else")


def test_every_template_and_branch_is_on_record(root: Path) -> None:
    result = check(root)
    assert result.ok, result.report()
    assert result.coverage is not None
    assert result.coverage.templates == template_names()
    assert len(result.coverage.templates) == len(list((root / "liyuan" / "prompts").glob("*.j2")))
    assert all(result.coverage.covered.get(o) for o in result.coverage.outcomes)
    assert "模版覆盖：" in result.report()


def test_a_new_if_branch_in_a_copied_template_fails_check(
        root: Path, change_prompt: Callable[[str, str, str], None]) -> None:
    change_prompt("summary_user.j2", "请照系统提示",
                  "{% if scene_reset is defined %}场景重置了就从头写。{% endif %}请照系统提示")
    result = check(root)
    assert result.diffs == []  # the new branch is never taken: no artifact changes ...
    assert not result.ok  # ... and that is exactly what the gate refuses
    text = result.report()
    line = next(i for i, row in enumerate(
        (Path(liyuan.prompts.environment().loader.searchpath[0]) / "summary_user.j2")  # type: ignore[union-attr]
        .read_text(encoding="utf-8").splitlines(), start=1) if "scene_reset" in row)
    assert f"liyuan/prompts/summary_user.j2 第 {line} 行 `{{% if scene_reset is defined %}}` 的「成立」" in text
    assert "模版覆盖不全" in text


def test_appending_a_sentence_to_any_template_fails_check_and_diff_names_the_step(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each template gets its own sentence, in copies; one regenerated run shows all of them.

    Replies are scripted by key and the story does not depend on prompt wording, so the
    sentence appended to one template reaches the artifacts whether or not the others
    changed too: one run stands for ten.
    """
    folder = tmp_path / "prompts"
    shutil.copytree(Path(liyuan.prompts.__file__).parent, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    sentences = {}
    for path in sorted(folder.glob("*.j2")):
        sentences[path.name] = f"（追加的测试句子：{path.stem}）"
        path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + sentences[path.name] + "\n",
                        encoding="utf-8")
    env = liyuan.prompts.environment().overlay(loader=jinja2.FileSystemLoader(folder))
    monkeypatch.setattr(liyuan.prompts, "_env", lambda: env)
    assert set(sentences) == set(template_names())

    run = regenerate(root)
    result = check_run(root, run)
    assert not result.ok
    changed = "".join(d.diff for d in result.diffs)
    text, _count = diff_run(root, "HEAD", run)
    sections = re.split(r"(?m)^(?=## )", text)
    for name, sentence in sentences.items():
        assert f"+{sentence}" in changed or sentence in changed, name
        naming = [s.splitlines()[0] for s in sections if sentence in s and s.startswith("## ")]
        assert naming, f"diff 没有哪一个步骤显示 {name} 的改动"
        assert all("步骤 " in head for head in naming), naming
