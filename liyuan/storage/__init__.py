"""Where a card's state is kept when one machine is not enough (issue 22).

The default is the card folder: files in it, read and written by the rest of liyuan.
The modules here are other backends behind the same seams, imported by their full name
(the PostgreSQL ones need the ``postgres`` extra): :mod:`liyuan.storage.pgsessions` keeps
the chats' sessions and names in PostgreSQL, :mod:`liyuan.storage.pgmemory` the card's
memory documents and (:mod:`liyuan.storage.pglocks`) its locks (the chats' vector memory
has its own: :class:`liyuan.vector.PostgresChunkStores`); :mod:`liyuan.storage.copy`
moves a whole card between the folder and the database.
"""

from __future__ import annotations

__all__: list[str] = []
