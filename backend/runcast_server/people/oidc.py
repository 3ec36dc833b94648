"""The OpenID Connect providers of the settings, as an Authlib Starlette registry: discovery
(``/.well-known/openid-configuration``), the authorization-code flow with PKCE (S256), state and
nonce, and the ID token's signature, issuer, audience, expiry and nonce checks are Authlib's."""

from __future__ import annotations

from authlib.integrations.starlette_client import OAuth

from runcast_server.core.settings import OidcProvider


def registry(providers: list[OidcProvider]) -> OAuth:
    """An Authlib registry with one client per provider (its name is the provider's ``name``)."""
    oauth = OAuth()
    for provider in providers:
        oauth.register(
            name=provider.name,
            client_id=provider.client_id,
            client_secret=provider.client_secret.get_secret_value(),
            server_metadata_url=provider.issuer.rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={"scope": provider.scope, "code_challenge_method": "S256"},
        )
    return oauth
