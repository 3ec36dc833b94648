"""The core every domain may use: settings, the database and its bulk writes, the tables, migrations, partitions, tokens, errors and the Celery app."""
