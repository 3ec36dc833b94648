"""Publication policies: what the public sees of a run (tables, store, the one filter; routes: api/routes/policy.py)."""
