"""The write path: store a batch of validated events, idempotently and in any order.

``store_batch`` is the one function that writes runs, segments, series, points,
rollups, timeline events and (through ``outputs.store``) samples, evals and media. It is safe to run twice on the same batch (every row
has a natural key and is written with ``ON CONFLICT``), and batches of one run may
arrive in any order: rollups are merged from the points a batch really inserted,
and run state only ever moves forward (max step, newest value, latest status).

Concurrency: the rows of the runs a batch touches are locked first, in id order
(``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite takes its database write lock
with the first statement), and every other write is sorted by primary key, so
two workers never deadlock and never race on a segment index or a run version.

The package, by job: ``checks`` (the door: ownership, run and segment registration),
``store`` (``store_batch``, the one writer), ``metrics`` (series, points, rollups),
``timeline`` (events), ``state`` (run state), ``bulk`` (many rows in few round trips),
``results`` (what a batch did, why one is refused), ``tables``. The run versions a batch
makes are recorded through ``runs.versions``, their one owner.
"""
