"""Published artifacts of a run: checkpoints (stored files), code revisions, dataset manifests,
the data-mix timeline and reproducibility cards.

Everything here is derived from the ``events`` table (checkpoint, run_started, manifest and
data_mix events) and from files under the storage root; no table of its own.

``storage``   the storage interface, the local filesystem backend and safe path resolution
``http``      the download response: single Range requests, If-Range, HEAD, sha256 ETag
``lineage``   segments of a run and which earlier segments a segment continues
``checkpoints``, ``revisions``, ``manifests``, ``cards``: the queries behind the routes
"""
