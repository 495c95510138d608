"""Crash safety: SIGKILL a writer at a random point; every completed append survives.

The child appends 1,000 entries (each one write, then fsync) and reports each id after
the append returns. The parent kills it with SIGKILL once a randomly chosen number of
ids has been reported; the child keeps writing meanwhile, so the kill lands at an
arbitrary point. Reloading must give exactly the entries 1..m, intact and in order,
where m is the number reported or one more (written, killed before reporting).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from liyuan.session.tree import SessionTree

from .crash_child import body

CHILD = Path(__file__).with_name("crash_child.py")
TOTAL = 1000


def kill_at_random_point(path: Path, target: int, durability: str = "entry") -> int:
    """Run the child, SIGKILL it after ``target`` reports; return how many were reported."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(path), str(TOTAL), durability],
                            stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    reported: list[str] = []
    try:
        for raw in proc.stdout:
            reported.append(raw.decode().strip())
            if len(reported) >= target:
                break
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    # Only whole lines count: a partial one was never fully reported.
    reported.extend(line.decode() for line in rest.split(b"\n")[:-1])
    assert reported == [f"e{i:04d}" for i in range(1, len(reported) + 1)]
    return len(reported)


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["entry", "turn"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_loses_nothing_completed_and_adds_nothing(tmp_path: Path, seed: int, durability: str) -> None:
    path = tmp_path / "chat.jsonl"
    target = random.Random(seed).randint(1, TOTAL - 1)
    reported = kill_at_random_point(path, target, durability)

    tree = SessionTree(path)
    ids = [e.id for e in tree]
    assert len(ids) in (reported, reported + 1), (reported, len(ids))
    assert ids == [f"e{i:04d}" for i in range(1, len(ids) + 1)]
    for i, entry in enumerate(tree, start=1):
        assert entry.text == body(i) and entry.role == ("user" if i % 2 else "assistant")
    assert [e.id for e in tree.branch()] == ids  # the chain of parents is whole

    # After the crash the file takes further appends, and they survive a reload.
    size_before = path.stat().st_size
    data_before = path.read_bytes()
    added = tree.append_message("user", "崩溃之后")
    assert path.read_bytes()[:size_before] == data_before
    again = SessionTree(path)
    assert [e.id for e in again] == [*ids, added.id]
    assert again.get(added.id) == added
    assert again.branch()[-1].parent_id == (ids[-1] if ids else None)
