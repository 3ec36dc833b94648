"""Sharing a run outside its page: the chart-only embed page, README badges, figures for
papers (SVG/PNG from the rollups) and the CORS policy of the public read API (docs/sharing.md):
the badge, the plotter, the CORS middleware and the share responses' ETags; the routes are
``api/routes/share.py``, with every route.

Everything here reads through the same access rules as the REST reads (``reads.access``):
a private run is the 404 of an unknown id to anyone without its project's token.
"""
