"""Dashboard sign-in: a project token exchanged for a server-side session behind an HttpOnly cookie.

``models`` (the ``dashboard_sessions`` table, migration 0010), ``service`` (sign in, look up,
sign out), ``http`` (the middleware that keeps signed-in answers out of shared caches); the
routes (``/api/v1/session``) are ``api/routes/session.py``, with every route. A session makes GET and HEAD requests a reader
of its project (``api.deps.viewer_project``); it never authorises a write. docs/auth.md.
"""
