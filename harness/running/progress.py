"""Progress lines on stderr while scenarios run.

Invariant: progress is for people watching a run and never reaches an artifact; it goes
to the stream it was given (stderr by default) and a quiet reporter prints nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .recorder import CallRecord

__all__ = ["Progress"]


class Progress:
    """Prints one line per step and per model call.

    Args:
        stream: Where to print (default ``sys.stderr``).
        quiet: Print nothing.
    """

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self._stream = stream
        self.quiet = quiet
        self._scenario = ""
        self._started = time.perf_counter()
        self._step_started = self._started

    def _print(self, line: str) -> None:
        if not self.quiet:
            print(line, file=self.stream, flush=True)

    @property
    def stream(self) -> TextIO:
        """Where the lines go: the given stream, else ``sys.stderr`` as it is now (the
        local model's server may have moved native output away from it)."""
        return self._stream if self._stream is not None else sys.stderr

    def scenario(self, name: str, steps: int, model: str) -> None:
        """A scenario starts."""
        self._scenario = name
        self._started = time.perf_counter()
        self._print(f"[{name}] 开始：{steps} 步 · 模型 {model}")

    def step(self, index: int, total: int, step_id: str, kind: str) -> None:
        """A step starts."""
        self._step_started = time.perf_counter()
        self._print(f"[{self._scenario}] 步骤 {index}/{total} {step_id}（{kind}）")

    def step_done(self, summary: str) -> None:
        """A step finished, with a one-line outcome."""
        seconds = time.perf_counter() - self._step_started
        self._print(f"[{self._scenario}]   → {summary} · {seconds:.2f} s")

    def call(self, record: CallRecord) -> None:
        """A model call finished."""
        who = {"scripted": "脚本回复", "placeholder": "占位回复"}.get(record.provenance, record.provenance or "失败")
        chars_in = sum(len(m["content"]) for m in record.request["messages"])
        chars_out = len(record.text or "")
        if record.usage:
            tokens = f"tokens {record.usage['prompt_tokens']}→{record.usage['completion_tokens']}"
        else:
            tokens = "tokens 未报告"
        status = f" · 错误：{record.error.splitlines()[0]}" if record.error else ""
        self._print(f"[{self._scenario}]   模型调用 {record.key} · {who} · {record.latency_ms / 1000:.2f} s"
                    f" · 输入 {chars_in} 字 / 输出 {chars_out} 字 · {tokens}{status}")

    def note(self, text: str) -> None:
        """Anything else worth a line (activity messages of the memory code)."""
        self._print(f"[{self._scenario}]   {text}")

    def scenario_done(self, files: int) -> None:
        """A scenario finished: print its file count and wall time."""
        seconds = time.perf_counter() - self._started
        self._print(f"[{self._scenario}] 完成：{files} 个文件 · {seconds:.2f} s")
