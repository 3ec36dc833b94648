"""What every read path shares: who may read (``access``), keyset cursors (``cursor``), what
readers outside a run's project see of what it sent (``published``), the response schemas,
the series that make a segment's step (``steps``) and metric values on the way out (``values``). It uses no other domain; the read services
themselves live with their data (``runs``, ``metrics``, ``artifacts``, ``alerts``, ``live``).
"""
