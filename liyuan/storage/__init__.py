"""Where a card's state is kept: one :class:`CardStorage` per backend, which owns its connections.

``Card.open(path)`` keeps a card in its folder (files, OS file locks, a SQLite file per
chat for vector memory): :meth:`CardStorage.folder`. Several app servers share one card
through PostgreSQL: ``Card.open(path, storage=CardStorage.postgres(dsn, scope="卡的 id"))``
keeps its sessions, chat names, memory documents, locks and vector memory in one database
(the ``postgres`` extra), over a pool of a fixed size. :func:`copy_card` moves a whole card
between the two. The modules: :mod:`~liyuan.storage.cardstorage` (the object),
:mod:`~liyuan.storage.folder`, :mod:`~liyuan.storage.pgdb` (connections, the error
mapping), :mod:`~liyuan.storage.pgschema`, :mod:`~liyuan.storage.pgsessions`,
:mod:`~liyuan.storage.pgmemory`, :mod:`~liyuan.storage.pglocks`,
:mod:`~liyuan.storage.pgchunks`, :mod:`~liyuan.storage.pgchunkstores`, :mod:`~liyuan.storage.copy`.
"""

from __future__ import annotations

from liyuan.storage.cardstorage import CardStorage
from liyuan.storage.copy import copy_card

__all__ = ["CardStorage", "copy_card"]
