"""Template coverage: every prompt template, and every branch in it, reaches an artifact.

The branches come from the templates themselves: each template is parsed by Jinja2
(``Environment.parse``) and its AST walked. Every ``{% if %}`` has the outcomes "taken"
and "not taken" (with ``elif`` arms: each arm taken, and none taken); every
``{% for %}`` has "zero items" and "several items" (two or more). A loop over the very
name an enclosing ``{% if %}`` tests cannot run with zero items; its "zero" is that if's
"not taken", already required.

How a render is traced: :func:`liyuan.prompts.observe_renders` reports each render
(template, variables, text). The harness renders the same template again from an
instrumented copy of its AST, in which every outcome writes a private-use sentinel,
and checks that the sentinel-free text equals the text liyuan returned. A render counts
only when its text is on record: inside the step's record (a prompt of a call, an
outcome) or in a file the step wrote. So "covered" means a committed artifact shows it,
and a change inside that branch changes that artifact.

Invariant: nothing here changes what liyuan renders; the gate reads, it never rewrites.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import nodes

from liyuan.prompts import environment, template_names

__all__ = ["CoverageReport", "CoverageTracker", "Outcome", "TemplateBranches", "branches_of", "coverage_report"]

_OPEN, _CLOSE = "\ue000", "\ue001"
_SENTINEL = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
_TAG = re.compile(r"\{%-?\s*(if|elif|for)\b.*?-?%\}")
_UNSUPPORTED = (nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport, nodes.Macro, nodes.CallBlock)
PROMPTS_DIR = "liyuan/prompts"


@dataclass(frozen=True)
class Outcome:
    """One way a branch of a template can go."""

    template: str
    line: int
    tag: str
    """The tag as written, e.g. ``{% if previous_summary %}``."""
    branch: str
    """``成立``, ``不成立``, ``零项``, ``多项（至少两项）``."""
    sentinel: int
    """Id of the sentinel this outcome writes (a loop's "several" counts its body's)."""
    several: bool = False

    def describe(self) -> str:
        """Chinese: where and which branch."""
        return f"{PROMPTS_DIR}/{self.template} 第 {self.line} 行 `{self.tag}` 的「{self.branch}」"


@dataclass
class TemplateBranches:
    """A template's outcomes and the instrumented template that reports them."""

    name: str
    outcomes: list[Outcome]
    problems: list[str]
    """Constructs the walk cannot instrument (reported as gaps)."""
    traced: jinja2.Template | None

    def hits(self, variables: Mapping[str, object], text: str) -> set[Outcome]:
        """The outcomes one render took, checked against the text liyuan returned.

        Raises:
            RuntimeError: The instrumented render does not reproduce ``text``.
        """
        if self.traced is None:
            return set()
        raw = self.traced.render(**variables)
        if _SENTINEL.sub("", raw).rstrip() != text:
            raise RuntimeError(f"覆盖检查重渲染 {self.name} 的结果和原文不一致：插桩有误")
        counts = Counter(int(m.group(1)) for m in _SENTINEL.finditer(raw))
        return {o for o in self.outcomes if counts[o.sentinel] >= (2 if o.several else 1)}


class _Walker:
    """Walks one template's AST, adding a sentinel to every outcome."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.lines = source.splitlines()
        self.outcomes: list[Outcome] = []
        self.problems: list[str] = []
        self._next = 0

    def _tag(self, line: int, keyword: str) -> str:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        for match in _TAG.finditer(text):
            if match.group(1) == keyword:
                return match.group(0)
        return f"{{% {keyword} … %}}"

    def _sentinel(self, line: int) -> tuple[int, nodes.Output]:
        sentinel = self._next
        self._next += 1
        return sentinel, nodes.Output([nodes.TemplateData(f"{_OPEN}{sentinel}{_CLOSE}")], lineno=line)

    def _mark(self, line: int, keyword: str, branch: str, *, several: bool = False) -> nodes.Output:
        sentinel, output = self._sentinel(line)
        self.outcomes.append(Outcome(self.name, line, self._tag(line, keyword), branch, sentinel, several))
        return output

    def body(self, stmts: list[nodes.Node], guards: frozenset[str]) -> None:
        for node in stmts:
            self.node(node, guards)

    def node(self, node: nodes.Node, guards: frozenset[str]) -> None:
        if isinstance(node, _UNSUPPORTED):
            self.problems.append(f"{PROMPTS_DIR}/{self.name} 第 {node.lineno} 行用了 "
                                 f"{type(node).__name__}，覆盖检查不支持，请改成 if/for")
            return
        if isinstance(node, nodes.If):
            self._if(node, guards)
            return
        if isinstance(node, nodes.For):
            self._for(node, guards)
            return
        for cond in node.find_all(nodes.CondExpr):
            self.problems.append(f"{PROMPTS_DIR}/{self.name} 第 {cond.lineno} 行有行内条件表达式"
                                 "（… if … else …），覆盖检查不支持，请改写成 {% if %}")
        for attr in ("body", "else_"):
            child = getattr(node, attr, None)
            if isinstance(child, list):
                self.body(child, guards)

    def _if(self, node: nodes.If, guards: frozenset[str]) -> None:
        self._expressions(node.test)
        tested = frozenset({node.test.name}) if isinstance(node.test, nodes.Name) else frozenset()
        arms = [node, *node.elif_]
        for arm in arms:
            keyword = "if" if arm is node else "elif"
            self.body(arm.body, guards | (tested if arm is node else frozenset()))
            arm.body.insert(0, self._mark(arm.lineno, keyword, "成立"))
        self.body(node.else_, guards)
        node.else_.insert(0, self._mark(node.lineno, "if", "不成立" if not node.elif_ else "所有条件都不成立"))

    def _for(self, node: nodes.For, guards: frozenset[str]) -> None:
        self._expressions(node.iter)
        self.body(node.body, guards)
        self.body(node.else_, guards)
        node.body.insert(0, self._mark(node.lineno, "for", "多项（至少两项）", several=True))
        guarded = isinstance(node.iter, nodes.Name) and node.iter.name in guards
        if not guarded:
            node.else_.insert(0, self._mark(node.lineno, "for", "零项"))

    def _expressions(self, expr: nodes.Node) -> None:
        for cond in expr.find_all(nodes.CondExpr):
            self.problems.append(f"{PROMPTS_DIR}/{self.name} 第 {cond.lineno} 行有行内条件表达式，覆盖检查不支持")


def branches_of(env: jinja2.Environment, name: str) -> TemplateBranches:
    """Parse ``name`` from ``env``'s loader and instrument every branch outcome."""
    if env.loader is None:
        raise RuntimeError("模版环境没有 loader")
    source, filename, _ = env.loader.get_source(env, name)
    tree = env.parse(source, name, filename)
    walker = _Walker(name, source)
    walker.body(tree.body, frozenset())
    traced = None
    if not walker.problems:
        code = env.compile(tree, name, filename)
        traced = env.template_class.from_code(env, code, env.make_globals(None))
    return TemplateBranches(name, walker.outcomes, list(dict.fromkeys(walker.problems)), traced)


@dataclass(frozen=True)
class RenderEvent:
    """One render during a run, with the step that caused it."""

    template: str
    out: str
    step: str
    text: str
    hits: frozenset[Outcome]


@dataclass
class CoverageTracker:
    """Collects renders while scenarios run (pass :meth:`observe` to ``observe_renders``)."""

    events: list[RenderEvent] = field(default_factory=list)
    _where: tuple[str, str] = ("", "")
    _cache: dict[tuple[int, str, str], TemplateBranches] = field(default_factory=dict)

    def begin_step(self, out: str, step_id: str) -> None:
        """Renders from now on belong to this step (``out`` names its record file)."""
        self._where = (out, step_id)

    def branches(self, template: jinja2.Template) -> TemplateBranches:
        """The instrumented copy of a rendered template (cached by environment and source)."""
        env, name = template.environment, template.name or ""
        source = env.loader.get_source(env, name)[0] if env.loader else ""
        key = (id(env), name, source)
        if key not in self._cache:
            self._cache[key] = branches_of(env, name)
        return self._cache[key]

    def observe(self, template: jinja2.Template, variables: Mapping[str, object], text: str) -> None:
        """Observer for :func:`liyuan.prompts.observe_renders`."""
        hits = self.branches(template).hits(variables, text)
        self.events.append(RenderEvent(template.name or "", *self._where, text, frozenset(hits)))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


@dataclass
class CoverageReport:
    """Which outcomes of which templates the recorded artifacts show."""

    templates: list[str]
    outcomes: list[Outcome]
    covered: dict[Outcome, list[str]]
    """Outcome to the steps (``out · step``) whose artifacts show it."""
    rendered: dict[str, list[str]]
    """Template to the steps whose artifacts hold a render of it."""
    problems: list[str]
    off_record: int
    """Renders whose text reached no artifact (not counted)."""

    @property
    def gaps(self) -> list[str]:
        """Chinese lines, one per template, outcome or construct no artifact covers."""
        lines = [f"{PROMPTS_DIR}/{t}：没有任何产物渲染过这个模版" for t in self.templates if not self.rendered.get(t)]
        lines += [f"{o.describe()} 这一支没有任何产物渲染过" for o in self.outcomes
                  if self.rendered.get(o.template) and not self.covered.get(o)]
        return lines + self.problems

    @property
    def ok(self) -> bool:
        """True when every template and every outcome is on record."""
        return not self.gaps

    def summary(self) -> str:
        """One Chinese line with the counts."""
        done = sum(1 for o in self.outcomes if self.covered.get(o))
        return (f"模版覆盖：{len(self.templates)} 个模版，{len([t for t in self.templates if self.rendered.get(t)])} 个"
                f"有产物；{len(self.outcomes)} 个分支出口，{done} 个有产物。")


def coverage_report(
    events: Sequence[RenderEvent],
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    files: Mapping[str, bytes],
    names: Iterable[str] | None = None,
) -> CoverageReport:
    """Coverage of the templates ``names`` (default: all of liyuan's) by renders on record."""
    env = environment()
    chosen = sorted(names) if names is not None else template_names()
    outcomes: list[Outcome] = []
    problems: list[str] = []
    for name in chosen:
        parsed = branches_of(env, name)
        outcomes.extend(parsed.outcomes)
        problems.extend(parsed.problems)
    steps = {(out, step["id"]): step for out, recs in records.items() for step in recs}
    covered: dict[Outcome, list[str]] = {}
    rendered: dict[str, list[str]] = {}
    off_record = 0
    by_key = {(o.template, o.line, o.tag, o.branch): o for o in outcomes}
    for event in events:
        step = steps.get((event.out, event.step))
        texts: list[str] = list(_strings(step)) if step else []
        if step:
            texts += [files[f].decode("utf-8") for f in step.get("files", []) if f in files]
        if not any(event.text in t for t in texts):
            off_record += 1
            continue
        where = f"{event.out} · {event.step}"
        if where not in rendered.setdefault(event.template, []):
            rendered[event.template].append(where)
        for hit in event.hits:
            # Keyed by position, not identity: the run may have parsed the template separately.
            target = by_key.get((hit.template, hit.line, hit.tag, hit.branch))
            if target is not None and where not in covered.setdefault(target, []):
                covered[target].append(where)
    return CoverageReport(chosen, outcomes, covered, rendered, problems, off_record)
