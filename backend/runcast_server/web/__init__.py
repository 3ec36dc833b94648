"""Web serving: the dashboard's pages and files, the API docs and the vendored browser bundles.

``assets`` (static files: ETags, compressed forms, cache rules), ``vendor`` (Plotly.js, Swagger UI,
ReDoc), ``frontend`` (``frontend/`` with versioned links) and ``pages`` (the routes). It imports no
other package of the server.
"""
