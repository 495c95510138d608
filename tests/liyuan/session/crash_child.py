"""Child process for test_crash: append entries to a session file until killed.

Usage: ``python crash_child.py PATH COUNT [entry|turn]``. After each append returns (the
line is written and fsynced), the entry's id is printed and flushed: the parent counts a
line as "reported" only once it has read it whole. With ``turn`` (``MemoryConfig.durability``)
the tree does not fsync per append; every second entry (a turn's reply) is followed by
one :meth:`SessionTree.sync`, as :meth:`liyuan.Chat.record` does.
"""

from __future__ import annotations

import sys
import time

from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.tree import SessionTree


def body(i: int) -> str:
    """Deterministic text of the i-th entry (1-based), of varying length."""
    return f"第{i}条：" + "云" * (i * 37 % 500)


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2])
    per_turn = len(sys.argv) > 3 and sys.argv[3] == "turn"
    tree = SessionTree(path, clock=fixed_clock(), ids=counter_ids(), fsync=not per_turn)
    for i in range(1, count + 1):
        entry = tree.append_message("user" if i % 2 else "assistant", body(i))
        if per_turn and i % 2 == 0:
            tree.sync()
        sys.stdout.write(entry.id + "\n")
        sys.stdout.flush()
    time.sleep(60)  # stay alive so the parent's kill always finds a running process


if __name__ == "__main__":
    main()
