"""The one reader of an entry's ``usage`` field (the generic agent baseline's agreement with it:
tests/harness/test_baseline_agent.py)."""

from __future__ import annotations

from typing import Any

import pytest

from liyuan.session.entries import custom, last_usage, message, usage_tokens


def reply(usage: Any) -> Any:
    return message("a", None, "assistant", "好", usage=usage)


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"prompt_tokens": 1000, "completion_tokens": 20}, 1020),
        ({"prompt_tokens": 1000, "completion_tokens": None}, 1000),  # a null the endpoint sent
        ({"prompt_tokens": 1000}, 1000),
        ({"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}, 1020),
        ({"total_tokens": 777, "prompt_tokens": None}, 777),
        ({"totalTokens": 5000, "input": 1}, 5000),
        ({"input": 10, "output": 5, "cacheRead": 1, "cacheWrite": None}, 16),
        ({"prompt_tokens": True, "completion_tokens": 3}, None),  # a bool or a negative count is no count
        ({"prompt_tokens": -5, "completion_tokens": 3}, None),  # a bool or a negative count is no count
        ({"prompt_tokens": "900"}, None),
        ({"prompt_tokens": 0, "completion_tokens": 0}, None),
        ({}, None),
        (None, None),
        ("1000", None),
        ([1000], None),
    ],
)
def test_usage_tokens_reads_both_shapes_and_survives_nulls(usage: Any, tokens: int | None) -> None:
    assert usage_tokens(reply(usage)) == tokens


def test_usage_tokens_without_a_usage_field() -> None:
    assert usage_tokens(message("a", None, "assistant", "好")) is None
    assert usage_tokens(custom("c", None, "rp-state", {"usage": {"prompt_tokens": 9}})) is None


def test_last_usage_is_the_newest_assistant_usage_from_start_on() -> None:
    branch = [message("u1", None, "user", "一", usage={"prompt_tokens": 50}),  # a user's usage counts never
              message("a1", "u1", "assistant", "好", usage={"prompt_tokens": 100}),
              custom("c", "a1", "rp-state", {}),
              message("a2", "c", "assistant", "好", usage={"prompt_tokens": 0}),  # no usable count
              message("a3", "a2", "assistant", "好", usage={"input": 7}),
              message("a4", "a3", "assistant", "好")]
    assert last_usage(branch) == (4, 7)
    assert last_usage(branch[:4]) == (1, 100)
    assert last_usage(branch[:4], start=2) is None  # a usage before start (the latest summary) is stale
    assert last_usage(branch, start=4) == (4, 7) and last_usage(branch, start=5) is None
    assert last_usage([]) is None and last_usage(branch[:1]) is None
