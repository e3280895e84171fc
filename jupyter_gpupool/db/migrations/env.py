"""alembic's environment for the gpupool service's database: migrations run on the connection
:func:`jupyter_gpupool.db.store.upgrade` hands over (never from an alembic.ini)."""

from __future__ import annotations

from alembic import context

from jupyter_gpupool.db.models import Base

connection = context.config.attributes["connection"]
# batch mode: SQLite alters tables by copying them
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
