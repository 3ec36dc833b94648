"""People: accounts (``users``), their external logins (``identities``), their roles in projects
(``memberships``), local passwords (argon2) and the OpenID Connect providers of the settings.

``models`` (the tables, migration 0020), ``passwords`` (hash and verify), ``service`` (accounts,
sign-in by password or identity, roles), ``oidc`` (the providers, through Authlib). The browser
session of a person is ``sessions/``; the routes are ``api/routes/people.py`` and
``api/routes/oidc.py``. docs/auth.md.
"""
