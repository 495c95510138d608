"""MkDocs hook: what the search index holds, and how a Chinese query is cut.

Five things Material's search plugin cannot be configured to do:

1. Keep code out of the index. The pages include whole prompts, Python sections and JSON
   dumps; indexed, they bury the prose in the results (a query lists previews full of
   code) and tab labels run together (``systemuser``). :func:`exclude_code` marks every
   highlighted block except prompt templates (``language-jinja``: their Chinese wording is
   worth finding), and every tab label row, with ``data-search-exclude``, the attribute the
   plugin honours. The prose that explains a block stays indexed.

2. Cut a Chinese query into whole terms. The search worker segments a Chinese query
   greedily against the index's own terms, but its loop stops one character short of the
   end of the query (``j < query.length``), so a query that is itself an indexed term
   (``前情提要``) is never tried whole: it is cut into ``前情`` and ``提``, and the page lights
   up every word starting with 提. :func:`patch_worker` changes that one comparison to
   ``<=`` in the built worker. The build fails if the pattern is not found, so an upgrade of
   Material that changes the worker is noticed, not silently left unpatched.

3. Find a short word inside a compound. jieba keeps the site's terms whole (``按来源遗忘``),
   and the worker matches a query term only as a prefix of an index term, so ``遗忘`` never
   finds a page that only says ``按来源遗忘``. :func:`patch_compounds` gives each Chinese
   query segment a leading wildcard as well (``*遗忘*``), and counts a query term as found
   when an index term contains it (not only when it starts with it). A whole term still
   matches itself, so it is still found and highlighted whole.

4. Write the index without escapes. The plugin writes ``search_index.json`` with
   ``ensure_ascii``: every Chinese character becomes a six-byte ``\\uXXXX`` escape, and so
   does every zero-width space jieba puts between words. :func:`compact_index` rewrites the
   same JSON as UTF-8 with no escapes and no spaces; the worker reads the same data.

5. Load the index when it is needed. The page script fetches ``search_index.json`` as soon as
   any page opens, so every first visit pays for the whole site's index. :func:`patch_bundle`
   makes that fetch wait until the reader opens search (the ``search`` toggle) or arrives
   from a search result (``?h=`` in the address, for the on-page highlight); the worker
   gets the index the same way as before, only later.

6. Search what is in the field, however it got there. The page script reads the field on
   ``keyup`` only, and an input method or a paste puts Chinese into it without one: the
   query stays whatever the field held when the index became ready (``按`` of ``按来源遗忘``,
   which then lights up every word starting with 按), or is never sent at all.
   :func:`patch_query_input` makes the field's ``input`` event send the query as well.

7. No result link with an empty highlight. A page that only its sections matched gets an
   article entry with no matched terms, and its link carried ``?h=`` with nothing after it.
   :func:`patch_article_terms` gives that entry the terms its sections matched (the link
   then highlights them on the page), and :func:`patch_result_links` drops the parameter
   whenever it would still be empty.

Invariant: page HTML changes only by added ``data-search-exclude`` attributes; the worker
and the page script change by the patches above, each found exactly once (or the build fails);
the index holds the same JSON value. The order: worker ``patch_worker``, ``patch_compounds``,
``patch_article_terms``; page script ``patch_bundle``, ``patch_query_input``, ``patch_result_links``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = ["compact_index", "exclude_code", "on_page_content", "on_post_build", "patch_article_terms", "patch_bundle",
           "patch_compounds", "patch_query_input", "patch_result_links", "patch_worker"]

# Highlighted blocks as pymdownx.highlight writes them (pygments_lang_class: true).
_CODE_BLOCK = re.compile(r'<div class="language-(?!jinja\b)[\w+-]+(?: [\w-]+)* highlight"')
_TAB_LABELS = re.compile(r'<div class="tabbed-labels"')
# The query segmentation loop, minified: for(let j=i+1;j<q.length;j++)q.slice(i,j)in index
_SEGMENT_LOOP = re.compile(r"for\(let (\w+)=(\w+)\+1;\1<(\w+)\.length;\1\+\+\)\3\.slice\(\2,\1\)in ")
# The segments of a Chinese query, joined: [...segment(s,this.index.invertedIndex)].join("* ")
_SEGMENT_JOIN = re.compile(r'(\[\.\.\.\w+\(\w+,this\.index\.invertedIndex\)\])\.join\("\* "\)')
# Which query terms a result matched: terms[t].startsWith(clause.term)
_TERM_FOUND = re.compile(r"(\w+\[\w+\])\.startsWith\((\w+)\.term\)")


def exclude_code(html: str) -> str:
    """Mark code blocks (but not prompt templates) and tab label rows as excluded from search."""
    html = _CODE_BLOCK.sub(lambda m: m.group(0) + " data-search-exclude", html)
    return _TAB_LABELS.sub(lambda m: m.group(0) + " data-search-exclude", html)


def patch_worker(source: str) -> str:
    """Let the worker try the whole query as one term (see the module docstring).

    Raises:
        ValueError: the loop is not in the worker exactly once.
    """
    found = _SEGMENT_LOOP.findall(source)
    if len(found) != 1:
        raise ValueError(f"搜索 worker 里找到 {len(found)} 处分词循环（应为 1 处）")
    return _SEGMENT_LOOP.sub(lambda m: m.group(0).replace(f"{m.group(1)}<{m.group(3)}.length",
                                                          f"{m.group(1)}<={m.group(3)}.length"), source)


def _once(pattern: re.Pattern[str], source: str, what: str, where: str = "搜索 worker") -> None:
    found = len(pattern.findall(source))
    if found != 1:
        raise ValueError(f"{where}里找到 {found} 处{what}（应为 1 处）")


def patch_compounds(source: str) -> str:
    """Let a Chinese query segment match inside a longer index term (see the module docstring).

    Raises:
        ValueError: either pattern is not in the worker exactly once.
    """
    _once(_SEGMENT_JOIN, source, "中文分段的拼接")
    _once(_TERM_FOUND, source, "命中词的判断")
    source = _SEGMENT_JOIN.sub(lambda m: m.group(1) + '.map(w=>"*"+w).join("* ")', source)
    return _TERM_FOUND.sub(lambda m: f"{m.group(1)}.includes({m.group(2)}.term)", source)


# The article entry added to a group that only sections matched: o.push(B(_({},a),{score:0,terms:{}}))
_ARTICLE_TERMS = re.compile(r"([\w$]+)\.push\(([\w$]+)\(([\w$]+)\(\{\},([\w$]+)\),\{score:0,terms:\{\}\}\)\)")


def patch_article_terms(source: str) -> str:
    """Give an article entry the terms its sections matched (see the module docstring).

    Raises:
        ValueError: the entry is not in the worker exactly once.
    """
    _once(_ARTICLE_TERMS, source, "文章条目的命中词")
    return _ARTICLE_TERMS.sub(
        lambda m: (f"{m.group(1)}.push({m.group(2)}({m.group(3)}({{}},{m.group(4)}),{{score:0,terms:"
                   f"Object.fromEntries({m.group(1)}.flatMap(x=>Object.entries(x.terms)).filter(([,y])=>y))}}))"),
        source)


def compact_index(text: str) -> str:
    """The same search index JSON, as UTF-8 without ``\\u`` escapes or spaces."""
    return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


# The page script's index fetch, and the names (minified) of what the worker setup uses:
#   index$ = document.forms.namedItem("search") ? fetchSearchIndex() : NEVER
#   merge(of(location.protocol !== "file:"), watchToggle("search")).pipe(first(a => a), switchMap(...))
#   fetchSearchIndex: ....pipe(map(() => __index), shareReplay(1))
_INDEX_FETCH = re.compile(r'([\w$]+)=document\.forms\.namedItem\("search"\)\?([\w$]+)\(\):([\w$]+)')
_WORKER_SETUP = re.compile(r'(?P<merge>[\w$]+)\((?P<of>[\w$]+)\(location\.protocol!=="file:"\),'
                           r'(?P<toggle>[\w$]+)\("search"\)\)'
                           r'\.pipe\((?P<first>[\w$]+)\((?P<arg>[\w$]+)=>(?P=arg)\),(?P<switch>[\w$]+)\(')
_SHARE = re.compile(r'\.pipe\([\w$]+\(\(\)=>__index\),([\w$]+)\(1\)\)')


def patch_bundle(source: str) -> str:
    """Fetch the search index only once search is opened or a result is followed.

    Raises:
        ValueError: a pattern is not in the page script exactly once.
    """
    for pattern, what in ((_INDEX_FETCH, "索引的加载"), (_WORKER_SETUP, "worker 的启动"), (_SHARE, "索引的共享")):
        found = len(pattern.findall(source))
        if found != 1:
            raise ValueError(f"页面脚本里找到 {found} 处{what}（应为 1 处）")
    names = _WORKER_SETUP.search(source)
    share = _SHARE.search(source)
    assert names is not None and share is not None

    def lazy(m: re.Match[str]) -> str:
        wanted = (f'{names["merge"]}({names["toggle"]}("search"),'
                  f'{names["of"]}(new URL(location.href).searchParams.has("h")))')
        return (f'{m.group(1)}=document.forms.namedItem("search")?{wanted}.pipe({names["first"]}(a=>a),'
                f'{names["switch"]}(()=>{m.group(2)}()),{share.group(1)}(1)):{m.group(3)}')

    return _INDEX_FETCH.sub(lazy, source)


# The query field's value stream: merge(worker ready, fromEvent(el, "keyup"), focus).pipe(map(() => el.value), ...)
_QUERY_KEYUP = re.compile(r'([\w$]+)\(([\w$]+),"keyup"\),([\w$]+)\)\.pipe\(([\w$]+)\(\(\)=>\2\.value\)')
# A result link's highlight: url.searchParams.set("h", Object.entries(doc.terms)....trim(),""))
_RESULT_HIGHLIGHT = re.compile(r'([\w$]+)\.searchParams\.set\("h",'
                               r'(Object\.entries\([\w$]+\.terms\)[^;]*?\.trim\(\),""\))\)')


def patch_query_input(source: str) -> str:
    """Send the query on the field's ``input`` event too, not only on ``keyup``.

    Raises:
        ValueError: the value stream is not in the page script exactly once.
    """
    _once(_QUERY_KEYUP, source, "搜索框的取值", "页面脚本")
    return _QUERY_KEYUP.sub(lambda m: (f'{m.group(1)}({m.group(2)},"keyup"),{m.group(1)}({m.group(2)},"input"),'
                                       f'{m.group(3)}).pipe({m.group(4)}(()=>{m.group(2)}.value)'), source)


def patch_result_links(source: str) -> str:
    """Leave the highlight parameter off a result link when it would be empty.

    Raises:
        ValueError: the highlight is not in the page script exactly once.
    """
    _once(_RESULT_HIGHLIGHT, source, "结果链接的高亮参数", "页面脚本")
    return _RESULT_HIGHLIGHT.sub(
        lambda m: (f'({m.group(1)}.searchParams.set("h",{m.group(2)}),'
                   f'{m.group(1)}.searchParams.get("h")||{m.group(1)}.searchParams.delete("h"))'), source)


def on_page_content(html: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before the search plugin indexes the page."""
    return exclude_code(html)


def on_post_build(*, config: Any, **_: Any) -> None:
    """MkDocs event: patch the search worker and page script copied into the built site; compact the index."""
    workers = sorted(Path(config["site_dir"]).glob("assets/javascripts/workers/search.*.min.js"))
    if len(workers) != 1:
        raise PluginError(f"搜索 worker 应该正好有一个，找到 {len(workers)} 个")
    try:
        patched = patch_article_terms(patch_compounds(patch_worker(workers[0].read_text(encoding="utf-8"))))
    except ValueError as error:
        raise PluginError(f"{workers[0].name}: {error}") from error
    workers[0].write_text(patched, encoding="utf-8")
    bundles = sorted(Path(config["site_dir"]).glob("assets/javascripts/bundle.*.min.js"))
    if len(bundles) != 1:
        raise PluginError(f"页面脚本应该正好有一个，找到 {len(bundles)} 个")
    try:
        script = patch_bundle(bundles[0].read_text(encoding="utf-8"))
        bundles[0].write_text(patch_result_links(patch_query_input(script)), encoding="utf-8")
    except ValueError as error:
        raise PluginError(f"{bundles[0].name}: {error}") from error
    index = Path(config["site_dir"]) / "search" / "search_index.json"
    index.write_text(compact_index(index.read_text(encoding="utf-8")), encoding="utf-8")
