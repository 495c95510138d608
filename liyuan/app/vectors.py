"""A chat's vector memory, opened where the card's storage keeps its chunks.

The card's :class:`~liyuan.storage.CardStorage` says where: in the folder, a SQLite file
per chat (:class:`~liyuan.storage.folder.FolderChunkStores`); in PostgreSQL, rows of the
card's database. Either way the ranking is the library's, so a chat recalls the same hits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStores
    from liyuan.vector.config import VectorConfig
    from liyuan.vector.memory import VectorMemory

__all__ = ["open_vector"]


def open_vector(chat_id: str, config: VectorConfig, stores: ChunkStores, *,
                say: Callable[[str], None], background: bool) -> VectorMemory:
    """The chat's vector memory, its index warming on the store's worker (the first recall
    queues behind it); fallback and eviction lines go to ``say``."""
    # Imported here: vector memory needs the `vector` extra (numpy, jieba); the rest does not.
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.recall import warm_in_background

    vector = VectorMemory(config, stores.open(chat_id), on_activity=say)
    warm_in_background(vector, say, background=background)
    return vector
