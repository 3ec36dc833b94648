"""Runs as readers and owners see them: the run list and one run's read, its updates (tags, config, summary), and management (rename, archive, delete)."""
