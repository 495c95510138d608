"""What the card-memory model calls are given: a chat's evidence, and the recap diff.

- :func:`branch_of` is a session's current branch as read **without touching it**
  (:meth:`SessionStore.read <liyuan.card.sessions.SessionStore.read>`; opening a
  :class:`~liyuan.session.tree.SessionTree` would create a file that vanished meanwhile, which
  would move the chat's fingerprint): the leaf is the last entry in file order.
- :func:`collect_chat_evidence` turns a chat's sessions (from the card's
  :class:`~liyuan.card.sessions.SessionStore`) into one transcript (summaries
  and text of each session's current branch, sessions separated by a marked line) and
  cuts the **earliest** text first when it is longer than the budget, at a paragraph
  break. It returns ``None`` when the chat has no turn at all (e.g. a greeting only).
- :func:`diff_recaps` compares the recap files with the manifest: which recaps are new
  or changed since the last merge, and which merged ones are gone (deleted chats).

Invariant: all of this only reads; nothing here writes a file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from liyuan.card.files import sha1_text
from liyuan.card.manifest import Manifest
from liyuan.card.memstore import MemoryStore
from liyuan.card.sessions import SessionStore, chat_name
from liyuan.errors import MemoryFileError
from liyuan.session.branch import branch_to
from liyuan.session.damage import SessionProblem
from liyuan.session.edits import revisions
from liyuan.session.entries import Entry, is_message
from liyuan.session.loader import SessionContent
from liyuan.session.state import format_state, state_from_branch
from liyuan.story.history import active_summary, serialize_for_summary
from liyuan.story.stale import stale_summaries
from liyuan.story.view import story_view
from liyuan.text import utf16_len, utf16_prefix

if TYPE_CHECKING:
    from liyuan.session.tree import SessionTree

__all__ = [
    "MERGE_BATCH_RECAPS",
    "RECAP_INPUT_MAX_CHARS",
    "SESSION_SEPARATOR",
    "ChangedRecap",
    "ChatEvidence",
    "OpenBranches",
    "RecapDiff",
    "SyncSettings",
    "branch_of",
    "collect_chat_evidence",
    "diff_recaps",
]

MERGE_BATCH_RECAPS = 8
"""Changed recaps one merge call takes; more wait for the next call of the same sync, so a
merge prompt stays bounded however many chats changed (each recap is bounded too)."""
RECAP_INPUT_MAX_CHARS = 60000
"""Transcript budget of one recap call (UTF-16 units); earliest text goes first."""

SESSION_SEPARATOR = "\n\n════ 另一个会话窗口 ════\n\n"
"""Between the sections of two session files of the same chat."""


@dataclass(frozen=True)
class ChatEvidence:
    """Everything the recap prompt needs from one chat's sessions."""

    transcript: str
    """Per session: optional ``【前情提要】`` section, then ``名字：正文`` blocks."""
    turns: int
    """User turns on the current branches, including turns already compacted."""
    omitted_chars: int
    """How much of the earliest text was cut to fit the budget (0 when none)."""
    state_snapshot: str
    """The ledger of the last session used, as :func:`~liyuan.session.state.format_state` prints it."""
    revisions: tuple[str, ...] = ()
    """Ids of the edits and deletions of earlier messages on the sessions' branches (issue 38,
    :mod:`liyuan.card.revised`)."""


@dataclass(frozen=True)
class ChangedRecap:
    """A recap that is new or changed since the last merge."""

    chat_id: str
    name: str
    """The chat's display name (``meta.json``), or its id."""
    text: str
    """The recap, trimmed."""


@dataclass(frozen=True)
class RecapDiff:
    """Recaps on disk against the manifest's merge records."""

    changed: list[ChangedRecap]
    deleted: list[str]
    """Chats whose recap was merged before and is gone from disk now: forget them."""
    hashes: dict[str, str]
    """sha1 of every recap on disk (what ``mergedHash`` becomes after a merge)."""

    @property
    def empty(self) -> bool:
        """True when there is nothing to merge and nothing to forget."""
        return not self.changed and not self.deleted

    @property
    def sent(self) -> list[str]:
        """Ids of the changed recaps (the chats a merge of this diff writes blocks for)."""
        return [recap.chat_id for recap in self.changed]

    def first(self, count: int) -> tuple[RecapDiff, int]:
        """The diff of one merge call: the first ``count`` changed recaps and every deletion.

        The recaps left out keep their old merge record (their hash is not in the batch's
        ``hashes``), so the next merge sees them as changed. Returns the batch and how
        many changed recaps it left out.
        """
        later = {recap.chat_id for recap in self.changed[count:]}
        hashes = {chat_id: digest for chat_id, digest in self.hashes.items() if chat_id not in later}
        return RecapDiff(self.changed[:count], self.deleted, hashes), len(later)


def branch_of(content: SessionContent, damage: list[str] | None = None) -> list[Entry]:
    """The current branch of a session as read, root first.

    Blank lines, bad JSON, the ``session`` header, entries without a string id and
    duplicate ids are skipped; a skipped line's place is kept (see
    :mod:`liyuan.session.damage`). The leaf is the last entry in file order, so a
    swiped-away sibling never appears.

    Args:
        content: The session, as the loader read it.
        damage: When given, receives the notes of links recovered or guessed on the branch,
            and of stored lines found missing (a row deleted by hand).
    """
    entries = content.entries
    branch = branch_to(entries, next(reversed(entries), None))
    if damage is not None:
        on_branch = {entry.id for entry in branch}
        damage.extend(p for p in content.problems if isinstance(p, SessionProblem)
                      and ((p.kind in ("branch-cut", "link-recovered") and p.entry_id in on_branch)
                           or p.kind == "missing-lines"))
    return branch


def _session_section(branch: Sequence[Entry], user_name: str, char_name: str) -> tuple[str, int] | None:
    """``(section text, user turns)`` of one session, or ``None`` when it holds no game.

    The story view is built once here; the turn count includes compacted turns.
    """
    view = story_view(branch, stale_summaries(branch))  # edits applied, stale summaries left out
    active = active_summary(view)
    live = view[active.cut:] if active else view
    if active is None and not any(is_message(e, "user") and e.text.strip() for e in live):
        return None  # a greeting alone is not a game
    parts: list[str] = []
    if active is not None:
        parts.append(f"【前情提要】\n{active.summary}")
    text = serialize_for_summary(live, user_name, char_name)
    if text:
        parts.append(text)
    return "\n\n".join(parts), sum(1 for e in view if is_message(e, "user"))


@dataclass(frozen=True)
class SyncSettings:
    """What a card's sync reads: the card's names and its slice of the memory's settings
    (:meth:`liyuan.config.MemoryConfig.sync_settings` builds it)."""

    user_name: str
    """The user's name in the story."""
    char_name: str
    """The card's character name."""
    language: str = "中文"
    """Output language of recaps and merges."""
    recap_input_max_chars: int = RECAP_INPUT_MAX_CHARS
    """Transcript budget of one recap call; beyond it the earliest text is left out (the prompt says how much)."""
    merge_recap_max_chars: int | None = None
    """Longest recap sent to a merge; ``None``: what one recap reply may be
    (:func:`liyuan.card.prompts.build_merge_prompt`)."""


LoadedBranch = Callable[[str, str], tuple[Sequence[Entry], list[str]] | None]
"""For a chat's session (chat id, session name), the branch to its last entry and its damage
notes, as an open chat already holds them (``None``: not open here, read the session)."""


class OpenBranches:
    """The session trees of the chats open in this process, by chat id: a :data:`LoadedBranch`.

    The card holds a chat's tree here while the chat is open and drops it when the chat
    closes; a recap reads an open chat's branch from its tree (no second parse of the file).
    Data flows down: the card hands this reader to its memory, nothing calls back into the card.
    """

    def __init__(self) -> None:
        self._trees: dict[str, SessionTree] = {}
        self._guard = threading.Lock()

    def hold(self, chat_id: str, tree: SessionTree) -> None:
        with self._guard:
            self._trees[chat_id] = tree

    def drop(self, chat_id: str) -> None:
        with self._guard:
            self._trees.pop(chat_id, None)

    def __call__(self, chat_id: str, name: str) -> tuple[Sequence[Entry], list[str]] | None:
        with self._guard:
            tree = self._trees.get(chat_id)
        log = tree.log if tree is not None else None
        return tree.written_branch() if tree is not None and log is not None and log.name == name else None


def collect_chat_evidence(
    sessions: SessionStore, chat_id: str, *, user_name: str, char_name: str,
    max_chars: int = RECAP_INPUT_MAX_CHARS, on_damage: Callable[[str], None] | None = None,
    loaded: LoadedBranch | None = None,
) -> ChatEvidence | None:
    """Gather one chat's evidence for its recap.

    Args:
        sessions: The card's sessions (:class:`~liyuan.card.sessions.SessionStore`).
        chat_id: The chat.
        user_name: Name written before the user's lines.
        char_name: Name written before the character's lines.
        max_chars: Transcript budget; beyond it the earliest text is cut, starting
            after the first paragraph break at or after the excess.
        on_damage: Receives a note for every damaged line whose place on a branch was
            recovered or guessed (the recap still uses the whole branch).
        loaded: Branches of sessions an open chat has in memory already: used instead of
            reading those sessions a second time (issue 24: a long chat's recap on
            opening it would otherwise parse the whole session again beside the open copy).

    Returns:
        The evidence, or ``None`` when no session has a user turn or a summary.
    """
    try:
        names = sessions.names(chat_id)
    except MemoryFileError:  # the chat's folder leads outside the card: nothing to read
        return None
    sections: list[str] = []
    turns = 0
    revised: list[str] = []
    last_branch: Sequence[Entry] | None = None
    for name in names:
        held = loaded(chat_id, name) if loaded is not None else None
        damage: list[str] = []
        if held is not None:
            branch, damage = held
        else:
            content = sessions.read(chat_id, name)
            branch = branch_of(content, damage) if content is not None else []
        if on_damage is not None:
            for note in damage:
                on_damage(note)
        revised.extend(entry.id for _at, entry in revisions(branch))
        found = _session_section(branch, user_name, char_name)
        if found is None:
            continue
        sections.append(found[0])
        turns += found[1]
        last_branch = branch
    if turns == 0 or last_branch is None:
        return None
    full = SESSION_SEPARATOR.join(sections)
    omitted = 0
    excess = utf16_len(full) - max_chars
    if excess > 0:
        # The shortest cut whose rest fits: keep the longest suffix within the budget.
        cut_at = len(full) - len(utf16_prefix(full[::-1], max_chars))
        brk = full.find("\n\n", cut_at)
        start = brk + 2 if brk >= 0 else cut_at
        omitted = utf16_len(full[:start])
        full = full[start:]
    return ChatEvidence(full, turns, omitted, format_state(state_from_branch(last_branch)), tuple(revised))


def diff_recaps(files: MemoryStore, manifest: Manifest, sessions: SessionStore, *,
                every: bool = False) -> RecapDiff:
    """Compare ``局/*.md`` with the manifest.

    A recap file emptied by hand counts as removed. Chats the hard path forgot are
    ignored on disk.

    Args:
        files: The card's file adapter (every recap is read through it).
        manifest: The loaded manifest.
        sessions: The card's sessions (the chats' display names).
        every: Count every recap on disk as changed (a handbook without any chat block
            must be rebuilt from all of them: a merge can only write blocks it is sent).

    Returns:
        New or changed recaps (sorted by id), deleted chats, and current hashes.

    Raises:
        MemoryFileError: ``局/`` cannot be listed, or a recap exists but cannot be read.
    """
    # A recap emptied by hand counts as gone; an unreadable one raises (never "deleted").
    on_disk = {k: v for k, v in files.recap_texts(manifest.forgotten()).items() if v.strip()}
    hashes = {chat_id: sha1_text(text) for chat_id, text in on_disk.items()}
    changed = [
        ChangedRecap(chat_id, chat_name(sessions, chat_id), on_disk[chat_id].strip())
        for chat_id in sorted(on_disk)
        if every or (record := manifest.recaps.get(chat_id)) is None or record.merged_hash != hashes[chat_id]
    ]
    # --8<-- [start:deleted_chats]
    # A chat is deleted when the manifest says its recap was merged and the recap is
    # gone from disk. A recap that vanished before it was ever merged left nothing
    # behind in the handbook, so there is nothing to forget.
    deleted = sorted(
        chat_id for chat_id, record in manifest.recaps.items()
        if record.merged_hash is not None and chat_id not in on_disk
    )
    # --8<-- [end:deleted_chats]
    return RecapDiff(changed, deleted, hashes)
