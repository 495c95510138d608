"""Prompt templates: Jinja2 files in this folder, rendered strictly.

Every prompt sentence lives in a ``*.j2`` file here, so a prompt change is a one-file
diff and the docs can include the template itself. Rendering uses ``StrictUndefined``:
a missing variable is an error, never an empty string. Everything that varies between
runs (names, language, texts) is passed in explicitly.

Material (story text, summaries, recaps, hand-edited memory, names) goes through
:func:`neutralize` before it is placed between our tags: whatever it says, it cannot
open or close a tag of ours or forge a mark line, so the prompt's structure is the code's.

Observers (:func:`observe_renders`) see every render: the template, its variables and the
text. They are for tools that audit prompts (the harness checks that every branch of every
template reaches a recorded artifact); rendering never depends on them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import jinja2

from liyuan.model import ModelRequest
from liyuan.model import request as two_part_request
from liyuan.text import utf16_len

__all__ = ["ECHO_FRAGMENTS", "ECHO_FRAGMENT_CHARS", "Prompt", "RenderObserver", "echoed_instructions", "echoed_tag",
           "environment", "neutralize", "observe_renders", "render", "template_names"]

_OUR_TAGS = r"conversation|previous-recap|previous-summary|recap|deleted-chats|handbook|resident"
"""Every tag name a template of ours writes around material."""
_TAG_RE = re.compile(rf"<(\s*/?\s*(?:{_OUR_TAGS}))(?![\w-])", re.IGNORECASE)
_MARK_RE = re.compile(r"=+(\s*(?:记忆|常驻摘要)\.md\s*)=+")
_SOURCE_TAG_RE = re.compile(r"\[(\s*)局(\s*)[:：]")
_SOURCE_LINE_RE = re.compile(r"(来源\s*[:：]\s*局\s*)/")
"""The handbook's provenance line ``来源：局/<id>.md``, in any spacing: its slash is what makes it one."""


def echoed_tag(reply: str) -> str | None:
    """The first of our own prompt tags found in a model's reply, or ``None``.

    Material goes into prompts neutralised (:func:`neutralize`), so a genuine summary,
    recap or merge never contains ``<conversation>``, ``<recap ...>`` and the like. A
    reply that does has copied its input: the echo a small base model produces passes
    a heading check (the system prompt lists the headings), but not this one.
    """
    match = _TAG_RE.search(reply)
    return f"<{match.group(1).strip()}>" if match else None


ECHO_FRAGMENT_CHARS = 12
"""A sentence of the instructions this long (UTF-16 units) or longer counts for :func:`echoed_instructions`."""
ECHO_FRAGMENTS = 2
"""How many such sentences a reply must repeat word for word to be an echo."""
_SENTENCE_END_RE = re.compile(r"[\n。！？；]")


def echoed_instructions(reply: str, instructions: str) -> str | None:
    """The first instruction sentence a reply repeats, if it repeats enough of them to be an echo.

    A small model sometimes answers with its system prompt. The summary prompt names the
    five headings, so such an echo passes the heading check; the instructions under the
    headings give it away. The instructions are split into sentences (at line ends and
    ``。！？；``); heading lines and sentences shorter than :data:`ECHO_FRAGMENT_CHARS`
    are ignored. A reply that contains :data:`ECHO_FRAGMENTS` or more of the rest, word
    for word, is an echo: a genuine summary quotes the story, not the instructions (one
    shared phrase is tolerated).

    Returns:
        The first repeated sentence, or ``None`` when the reply is not an echo.
    """
    found: list[str] = []
    for sentence in dict.fromkeys(s.strip() for s in _SENTENCE_END_RE.split(instructions)):
        if sentence.startswith("#") or utf16_len(sentence) < ECHO_FRAGMENT_CHARS:
            continue
        if sentence in reply:
            found.append(sentence)
            if len(found) >= ECHO_FRAGMENTS:
                return found[0]
    return None


def neutralize(text: str, *, source_tags: bool = True) -> str:
    """Make material unable to open or close our structure.

    Args:
        text: Story text, a summary, a recap, a hand-edited aggregate or a name.
        source_tags: Also defuse ``[局:id]`` tags and ``来源：局/<id>.md`` provenance
            lines. Off for the handbook and the resident summary, whose tags and lines
            are the memory's real provenance, and for story prompts, where they mean
            nothing.

    Returns:
        The text with our tags (``＜conversation>`` ...), the card-memory mark lines
        (``＝``) and optionally the source tags (``［局：``) and provenance lines
        (``来源：局／``) made inert; everything else unchanged.
    """
    text = _TAG_RE.sub(lambda m: "＜" + m.group(1), text)
    text = _MARK_RE.sub(lambda m: "＝" * 5 + m.group(1) + "＝" * 5, text)
    if source_tags:
        text = _SOURCE_TAG_RE.sub("［局：", text)
        text = _SOURCE_LINE_RE.sub(lambda m: m.group(1) + "／", text)
    return text


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("liyuan", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


RenderObserver = Callable[[jinja2.Template, Mapping[str, object], str], None]
"""Called after each render with the template, the variables and the returned text."""

_observers: list[RenderObserver] = []
"""The observers of every render in this process (:func:`observe_renders`).

Process-wide because :func:`render` is a module function reached from deep inside the
library (story, discussion and card prompts, from any card and any background thread),
and an audit wants every render whoever made it: threading an observer through each
card and each call would add a parameter to every prompt path for a tool's sake.
Lifetime: an observer is registered for the duration of its ``with observe_renders(...)``
block and removed when the block ends, even on error; with no block open the list is
empty and rendering does not depend on it.
"""
_observers_lock = threading.Lock()


def environment() -> jinja2.Environment:
    """The Jinja2 environment every prompt is rendered with (strict, block-trimming)."""
    return _env()


def template_names() -> list[str]:
    """Every prompt template (``*.j2``) the environment can load, sorted."""
    return sorted(environment().list_templates(extensions=["j2"]))


@contextmanager
def observe_renders(observer: RenderObserver) -> Iterator[None]:
    """Call ``observer`` after every :func:`render` (in any thread) while the block runs."""
    with _observers_lock:
        _observers.append(observer)
    try:
        yield
    finally:
        with _observers_lock:
            _observers.remove(observer)


def render(name: str, /, **variables: object) -> str:
    """Render ``liyuan/prompts/<name>`` with ``variables``; trailing whitespace is trimmed."""
    template = _env().get_template(name)
    text = template.render(**variables).rstrip()
    with _observers_lock:
        observers = tuple(_observers)
    for observer in observers:
        observer(template, variables, text)
    return text


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered two-part prompt and where it came from."""

    purpose: str
    """``summary``, ``recap``, ``merge``, ``discussion``, ``agent-summary`` ..."""
    system: str
    user: str
    system_template: str
    """Template file name of the system part (under ``liyuan/prompts/``)."""
    user_template: str
    max_tokens: int = 4096

    def request(self) -> ModelRequest:
        """The model request: system message, then the user text (:func:`liyuan.model.request`)."""
        return two_part_request(self.purpose, self.system, self.user, max_tokens=self.max_tokens)

    def as_text(self) -> str:
        """Human-readable form for artifacts: role headers, then each part."""
        return f"===== system =====\n{self.system}\n\n===== user =====\n{self.user}\n"
