"""梨园记忆 (liyuan memory): layered memory for long role-play chats.

"The earlier, the harder it is compressed": the last 6 turns verbatim; older turns
compacted into a five-section relay summary replayed as one 【前情提要】 message;
optional vector memory of the trimmed text; cross-session card memory (recaps merged
into a handbook and a resident summary under a shared budget); forgetting by source.
"""

from __future__ import annotations

__version__ = "0.1.0"
