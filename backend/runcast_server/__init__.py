"""Runcast's server: the FastAPI app, the Celery ingest worker and the database."""
