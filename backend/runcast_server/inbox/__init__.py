"""The ingest inbox: accepted batches are committed to ``ingest_inbox`` before the API
answers 202; workers store them from there; a sweeper re-enqueues what the broker lost;
batches that can never be stored are quarantined there. See docs/ingest.md."""
