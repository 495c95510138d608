"""The discussion step sizes the context with the library's own usage reader."""

from __future__ import annotations

from harness.steps import discussion_steps
from liyuan.session.entries import message


def test_a_null_completion_count_does_not_crash_the_step() -> None:
    branch = [message("u1", None, "user", "写第一章"),
              message("a1", "u1", "assistant", "写好了", usage={"prompt_tokens": 900, "completion_tokens": None}),
              message("u2", "a1", "user", "再写一章")]
    sizes = discussion_steps._sizes(branch)
    assert sizes["last_request_usage_tokens"] == 900


def test_the_agent_shape_of_usage_is_read_too() -> None:
    branch = [message("u1", None, "user", "写"),
              message("a1", "u1", "assistant", "好", usage={"totalTokens": 1234})]
    assert discussion_steps._sizes(branch)["last_request_usage_tokens"] == 1234
