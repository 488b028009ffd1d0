"""The SQL store: SQLAlchemy 2 models, Alembic migrations, and the queries the service makes."""
