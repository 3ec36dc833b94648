"""The run record: the tables every domain reads (``models``) and the PostgreSQL partitions of
a run's rows (``partitions``). It imports only ``core``."""
