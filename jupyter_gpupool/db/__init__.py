"""The service's database: SQLAlchemy 2 models, alembic migrations, and the store the service
writes through (:class:`~.store.Database`)."""
