"""``/api/v1/session/oidc/...``: sign in with an OpenID Connect provider of the settings.

``GET /session/providers`` lists them for the sign-in form; ``.../{provider}/login`` sends the
browser to the provider (Authlib keeps state, nonce and the PKCE verifier in a signed, short-lived
cookie of Starlette's ``SessionMiddleware``, SameSite=Lax so that it comes back with the
provider's redirect); ``.../{provider}/callback`` has Authlib exchange the code and validate the
ID token, finds or makes the person (``people.service.user_for_identity``), opens the same
session cookie as a password sign-in, and redirects to the page the login started from.
"""

from __future__ import annotations

from typing import Annotated, Any

from authlib.integrations.base_client.errors import OAuthError
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from runcast_server.api.deps import SessionDep
from runcast_server.api.read_deps import SettingsDep
from runcast_server.api.routes.session import open_person_session
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.people.service import user_for_identity

router = APIRouter(tags=["session"])
ProviderPath = Annotated[str, Path(max_length=40, description="The provider's name (RUNCAST_OIDC_PROVIDERS).")]
RETURN_KEY = "runcast_return_to"


class Provider(BaseModel):
    name: str
    display_name: str
    login_url: str


class Providers(BaseModel):
    providers: list[Provider]


@router.get("/session/providers", response_model=Providers)
def list_providers(settings: SettingsDep, response: Response) -> Providers:
    """The OpenID Connect providers people may sign in with (empty when none is configured). The
    same for everyone until the server's configuration changes: a shared cache may keep it a minute."""
    response.headers["Cache-Control"] = "public, max-age=60"
    return Providers(providers=[Provider(name=p.name, display_name=p.display_name,
                                         login_url=f"/api/v1/session/oidc/{p.name}/login")
                                for p in settings.oidc_providers])


def _client(request: Request, provider: str) -> Any:
    client = request.app.state.oauth.create_client(provider) if request.app.state.oauth is not None else None
    if client is None:
        raise NotFound("provider", field="provider")
    return client


def _return_path(raw: str | None) -> str:
    """A path of this site to come back to (anything else, an absolute URL included, is ``/``)."""
    return raw if raw and raw.startswith("/") and not raw.startswith("//") and "\\" not in raw else "/"


@router.get("/session/oidc/{provider}/login", status_code=302, responses=error_responses(404, 422))
async def oidc_login(request: Request, provider: ProviderPath,
                     next: Annotated[str | None, Query(max_length=2000, description="A path of this site to "
                                                       "return to after sign-in.")] = None) -> Any:
    """Send the browser to the provider's authorization page."""
    client = _client(request, provider)
    request.session[RETURN_KEY] = _return_path(next)
    return await client.authorize_redirect(request, str(request.url_for("oidc_callback", provider=provider)))


@router.get("/session/oidc/{provider}/callback", status_code=303, responses=error_responses(400, 404, 422))
async def oidc_callback(request: Request, session: SessionDep, settings: SettingsDep,
                        provider: ProviderPath) -> Any:
    """The provider's redirect back: the code is exchanged and the ID token validated (Authlib); a
    refused or forged answer (wrong state, an error from the provider, a bad token) is a 400."""
    client = _client(request, provider)
    try:
        token = await client.authorize_access_token(request)
    except OAuthError as exc:
        raise ApiError(400, f"the sign-in with {provider} failed: {exc.error}", field="state") from exc
    claims = token.get("userinfo")
    if not claims or not claims.get("sub"):
        raise ApiError(400, f"{provider} sent no ID token", field="id_token")
    metadata = await client.load_server_metadata()
    user = user_for_identity(session, str(metadata["issuer"]), dict(claims))
    response = RedirectResponse(request.session.pop(RETURN_KEY, "/"), status_code=303)
    open_person_session(request, response, session, settings, user)
    return response
