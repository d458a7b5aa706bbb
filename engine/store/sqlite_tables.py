"""sqlite-utils tables, typed as tables.

``db[name]`` is typed ``Table | View`` by sqlite-utils because a name may belong to a view.
The engine never creates views, so every name it writes to is a table; these helpers say so
once, checked, instead of at every call site.
"""

from __future__ import annotations

import sqlite_utils
from sqlite_utils.db import Table


def table_named(db: sqlite_utils.Database, name: str) -> Table:
    """``db[name]`` as a ``Table``; TypeError if ``name`` is a view (the schema never makes one)."""
    found = db[name]
    if not isinstance(found, Table):
        raise TypeError(f"{name!r} is a view, not a table")
    return found


def inserted_id(inserted: Table) -> int:
    """The integer primary key of the row ``Table.insert`` just wrote."""
    last_pk = inserted.last_pk
    # insert() sets last_pk for every row it writes; None here means it wrote nothing.
    if last_pk is None:
        raise TypeError(f"no row was inserted into {inserted.name!r}")
    return int(last_pk)


def quoted(name: str) -> str:
    """``name`` as an SQL identifier, for statements built from names read out of a schema."""
    return '"' + name.replace('"', '""') + '"'
