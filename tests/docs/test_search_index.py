"""The search hook: code and raw JSON stay out of the index, and the worker patch holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .hook import load_hook

hook = load_hook("search_index")


def test_code_blocks_and_tab_labels_are_excluded_but_prompts_are_not() -> None:
    html = ('<div class="language-json highlight"><pre>{}</pre></div>'
            '<div class="language-jinja highlight"><pre>prompt</pre></div>'
            '<div class="tabbed-labels"><label>system</label></div>')
    out = hook.exclude_code(html)
    assert '<div class="language-json highlight" data-search-exclude>' in out
    assert '<div class="language-jinja highlight"><pre>' in out
    assert '<div class="tabbed-labels" data-search-exclude>' in out


def test_worker_patch_changes_one_comparison_and_refuses_an_unknown_worker() -> None:
    source = "a;for(let o=s+1;o<t.length;o++)t.slice(s,o)in e&&(n[s]=o-s);b"
    assert hook.patch_worker(source) == "a;for(let o=s+1;o<=t.length;o++)t.slice(s,o)in e&&(n[s]=o-s);b"
    with pytest.raises(ValueError, match="0 处"):
        hook.patch_worker("for(let o=s+1;o<=t.length;o++)t.slice(s,o)in e")


def test_the_built_index_holds_prose_not_dumps(built_site: Path) -> None:
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    text = "".join(doc["text"] for doc in index["docs"])
    assert '"calls": [' not in text and '"max_tokens": ' not in text  # the sim/out JSON dumps
    assert "systemuser" not in text.replace("\u200b", "")
    assert "前情提要" in text
    worker = next((built_site / "assets" / "javascripts" / "workers").glob("search.*.min.js"))
    assert "<=t.length;o++)t.slice(s,o)in" in worker.read_text(encoding="utf-8") or \
        hook._SEGMENT_LOOP.search(worker.read_text(encoding="utf-8")) is None


def test_a_chinese_segment_also_matches_inside_a_longer_term() -> None:
    source = ('x=e.replace(r,s=>[...fe(s,this.index.invertedIndex)].join("* "));'
              'for(let o of r)e[s].startsWith(o.term)&&(n[o.term]=!0)')
    out = hook.patch_compounds(source)
    assert '[...fe(s,this.index.invertedIndex)].map(w=>"*"+w).join("* ")' in out
    assert "e[s].includes(o.term)" in out and "startsWith" not in out
    with pytest.raises(ValueError, match="0 处"):
        hook.patch_compounds("nothing to patch")


def test_the_page_script_fetches_the_index_only_when_search_is_wanted() -> None:
    source = ('function ks(){return a?b.pipe(m(()=>__index),Z(1)):c}'
              'zi=document.forms.namedItem("search")?ks():tt,'
              'L($(location.protocol!=="file:"),Je("search")).pipe(Re(o=>o),b(()=>t))')
    out = hook.patch_bundle(source)
    assert ('zi=document.forms.namedItem("search")?L(Je("search"),$(new URL(location.href).searchParams.has("h")))'
            '.pipe(Re(a=>a),b(()=>ks()),Z(1)):tt') in out
    with pytest.raises(ValueError, match="页面脚本"):
        hook.patch_bundle(source.replace("?ks():tt", ""))


def test_the_index_is_written_without_escapes(built_site: Path) -> None:
    raw = (built_site / "search" / "search_index.json").read_text(encoding="utf-8")
    escapes = re.findall(r"(?<!\\)\\u[0-9a-f]{4}", raw)  # a JSON escape, not an escaped backslash before u
    assert len(escapes) < 10, len(escapes)
    assert "\u200b" in raw  # the word separator is still there, as the character itself
    assert json.loads(hook.compact_index('{"a": "\\u6897 \\u200b"}')) == {"a": "\u6897 \u200b"}


def test_the_query_is_read_on_input_too_and_an_empty_highlight_is_dropped() -> None:
    value = 'n=L(t.pipe(Re(zt)),h(e,"keyup"),o).pipe(m(()=>e.value),Y());L(h(window,"keyup"),x)'
    out = hook.patch_query_input(value)
    assert 'h(e,"keyup"),h(e,"input"),o).pipe(m(()=>e.value)' in out and 'L(h(window,"keyup"),x)' in out
    with pytest.raises(ValueError, match="搜索框"):
        hook.patch_query_input('L(h(window,"keyup"),x)')
    link = ('V("search.highlight")&&s.searchParams.set("h",Object.entries(e.terms).filter(([,c])=>c)'
            '.reduce((c,[p])=>`${c} ${p}`.trim(),""));let{tags:a}=Te();')
    out = hook.patch_result_links(link)
    assert out.startswith('V("search.highlight")&&(s.searchParams.set("h",Object.entries(e.terms)')
    assert '.trim(),"")),s.searchParams.get("h")||s.searchParams.delete("h"));let{tags:a}' in out
    with pytest.raises(ValueError, match="高亮参数"):
        hook.patch_result_links("nothing")


def test_an_article_entry_gets_the_terms_its_sections_matched() -> None:
    source = ("for(let[s,o]of n)if(!o.find(a=>a.location===s))"
              "{let a=this.map.get(s);o.push(B(_({},a),{score:0,terms:{}}))}")
    out = hook.patch_article_terms(source)
    assert ("o.push(B(_({},a),{score:0,terms:Object.fromEntries(o.flatMap(x=>Object.entries(x.terms))"
            ".filter(([,y])=>y))}))") in out
    with pytest.raises(ValueError, match="0 处"):
        hook.patch_article_terms("nothing")
