"""Runs as readers and owners see them: the run list and one run's read (``queries``), its
timeline (``events``), its updates (tags, config, summary: ``updates``), its versions and
their replay log (``versions``, written by ingest and the alerts engine), and management
(rename, archive, delete: ``manage``)."""
