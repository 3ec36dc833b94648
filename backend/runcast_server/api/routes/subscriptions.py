"""``/subscriptions``: anyone may subscribe to a public run or project (webhook or email).

No account: creation returns the webhook secret and the unsubscribe link once; the
unsubscribe token (in every delivery) is also the only way to read one's own
subscription. There is no listing: a subscriber never sees other subscribers.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from runcast.wire.events import ID_RE, PROJECT_RE, check_text
from runcast.wire.limits import NO_NUL, WHITESPACE
from sqlalchemy import select

from runcast_server.alerts import chat, email, ssrf
from runcast_server.alerts.models import Subscription
from runcast_server.alerts.schemas import SubscriptionStatus, SubscriptionView
from runcast_server.alerts.transport import new_secret, unsubscribe_url
from runcast_server.api.deps import SessionDep, ViewerDep, client_ip, over_rate_limit
from runcast_server.api.read_deps import SettingsDep
from runcast_server.api.routes.alerts import AlertKind, base_url
from runcast_server.core.errors import (
    ApiError,
    NotFound,
    error_responses,
)
from runcast_server.core.i18n import languages, messages
from runcast_server.core.models import Project
from runcast_server.reads.access import readable_run

router = APIRouter(tags=["subscriptions"])
EMAIL_RE = re.compile(rf"^[^@{WHITESPACE}<>,;\"]{{1,64}}@[A-Za-z0-9.-]{{1,253}}\.[A-Za-z]{{2,63}}$")
# What alerts.ssrf.vet reads as a URL of a host (its scheme read case-insensitively), without credentials.
# Where the host resolves is the world's: a webhook that reaches no public address is refused at once.
WEBHOOK_URL: Final = rf"^[hH][tT][tT][pP][sS]?://[^/?#@\\{WHITESPACE}]+([/?#]|$)"


def _one_of(*fields: str) -> list[dict[str, Any]]:
    return [{"required": [f], "properties": {f: {"type": "string"}}} for f in fields]


# The rules between fields that create_subscription checks: exactly one of run and project; a secret only
# for the signed robots; a webhook's
# url, an email subscription's address.
_RULES: Final[dict[str, Any]] = {
    "allOf": [
        {"oneOf": _one_of("run", "project")},  # not top-level: a client generator would read alternatives
        # A signing secret is given only for the robots that are signed with one (a webhook's is made).
        {"if": {"required": ["secret"], "properties": {"secret": {"type": "string"}}},
         "then": {"required": ["format"], "properties": {"format": {"enum": ["feishu", "dingtalk"]}}}},
        # A robot's URL carries its token (chat.url_secret): Feishu's path ends in it, DingTalk's and
        # WeCom's query names it.
        {"if": {"required": ["format"], "properties": {"format": {"const": "feishu"}}},
         "then": {"properties": {"url": {"type": "string", "pattern": r"^[^?#]*://[^/?#]*/(?:[^?#]*/)?[^/?#]+(?:[?#]|$)"}}}},
        {"if": {"required": ["format"], "properties": {"format": {"const": "dingtalk"}}},
         "then": {"properties": {"url": {"type": "string", "pattern": r"^[^?#]*\?(?:[^#]*&)?access_token=[^&#]"}}}},
        {"if": {"required": ["format"], "properties": {"format": {"const": "wecom"}}},
         "then": {"properties": {"url": {"type": "string", "pattern": r"^[^?#]*\?(?:[^#]*&)?key=[^&#]"}}}},
    ],
    "if": {"properties": {"channel": {"const": "webhook"}}},
    "then": {"required": ["url"], "properties": {"url": {"type": "string", "pattern": WEBHOOK_URL}}},
    "else": {"required": ["email"], "properties": {"email": {"type": "string", "pattern": EMAIL_RE.pattern},
                                                   "format": {"not": {"enum": ["feishu", "dingtalk", "wecom"]}},
                                                   "secret": {"type": "null"}}},
}


Notice = Literal["alerts", "reports"]


def _alerts_only() -> list[Notice]:
    """What a subscription is sent when it does not say: alerts, as every subscription before ``notices``."""
    return ["alerts"]


class NewSubscription(BaseModel):
    """Exactly one of ``run`` and ``project``; ``url`` for a webhook, ``email`` for email."""

    model_config = ConfigDict(json_schema_extra=_RULES)

    run: str | None = Field(None, max_length=64, pattern=NO_NUL,
                            description="A run id (public or unlisted; private with its project's token).")
    project: str | None = Field(None, max_length=100, pattern=NO_NUL,
                                description="A project: alerts of all its public runs.")
    channel: Literal["webhook", "email"]
    url: str | None = Field(None, max_length=2048, pattern=NO_NUL, description="Webhook URL (http or https).")
    email: str | None = Field(None, max_length=320, pattern=NO_NUL)
    format: Literal["json", "slack", "discord", "feishu", "dingtalk", "wecom"] = Field(
        "json", description="The body: Runcast's JSON, or a Slack, Discord, Feishu/Lark, DingTalk or WeCom message.")
    secret: str | None = Field(None, min_length=1, max_length=128, pattern=NO_NUL,
                               description="feishu and dingtalk only: the robot's signing secret (never shown again).")
    language: str = Field("en", max_length=16, json_schema_extra={"enum": list(languages())},
                          description="The language of its messages: one of the served languages (en, zh-CN).")
    kinds: list[AlertKind] = Field(default_factory=list, description="Only these kinds (empty: all).")
    notify_close: bool = Field(False, description="Also notify when an alert closes.")
    notices: list[Notice] = Field(
        default_factory=_alerts_only, min_length=1, max_length=2,
        description="What it is sent: alerts, and/or a notice when the team publishes a report "
                    "(once per report). Default: alerts only, as before.")

    @field_validator("run", "project", "url", "email", "secret")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else check_text(value, "text")

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        if value not in languages():
            raise ValueError(f"the language must be one of {', '.join(languages())}")
        return value


def _chat_checks(body: NewSubscription) -> None:
    """A chat robot's URL carries its secret, and only Feishu and DingTalk robots take a signing secret."""
    if body.secret is not None and body.format not in chat.SIGNED:
        raise ApiError(422, "only feishu and dingtalk subscriptions take a secret (a webhook's is made for it)",
                       field="secret")
    if body.format in chat.FORMATS and not chat.url_secret(body.format, body.url or ""):
        where = {"feishu": "its path's last part", "dingtalk": "access_token=", "wecom": "key="}[body.format]
        raise ApiError(422, f"a {body.format} robot's URL carries its token ({where}): paste the whole URL",
                       field="url")


def _view(sub: Subscription, run: str | None, project: str | None) -> dict[str, Any]:
    return {
        "id": sub.id,
        "run": run,
        "project": project,
        "channel": sub.channel,
        "target": chat.mask(sub.format, sub.target),
        "format": sub.format,
        "kinds": sub.kinds,
        "language": sub.language,
        "notify_close": sub.notify_close,
        "notices": list(sub.notices or ["alerts"]),
        "status": sub.status,
        "failures": sub.failures,
        "unsubscribe_url": unsubscribe_url(sub),
    }


@router.post("/subscriptions", status_code=201, response_model=SubscriptionView, response_model_exclude_unset=True,
             responses=error_responses(400, 401, 404, 422, 429, 502))
def create_subscription(
    request: Request, session: SessionDep, settings: SettingsDep, viewer: ViewerDep, body: NewSubscription
) -> Any:
    """Subscribe. Webhooks are active at once (the response holds their signing secret,
    shown once); email subscriptions wait for the link in the confirmation mail."""
    refused = over_rate_limit(request, session, "subscribe", settings.subscribe_rate_limit,
                              settings.subscribe_rate_window_s, "too many subscriptions from this address; try again later")
    if refused is not None:
        return refused
    if (body.run is None) == (body.project is None):
        raise ApiError(422, "give exactly one of run or project", field="run")
    if body.channel == "webhook":
        _chat_checks(body)
    elif body.format in chat.FORMATS or body.secret is not None:
        raise ApiError(422, "an email subscription takes neither a chat format nor a secret",
                       field="secret" if body.secret is not None else "format")
    run_id = project_id = None
    project_name: str | None = None
    if body.run is not None:
        if not ID_RE.match(body.run):
            raise NotFound("run", field="run")
        run, project_name = readable_run(session, body.run, viewer)
        run_id = run.id
    else:
        if not PROJECT_RE.match(body.project or ""):
            raise NotFound("project", field="project")
        project = session.scalar(select(Project).where(Project.name == body.project))
        if project is None:
            raise NotFound("project", field="project")
        project_id, project_name = project.id, project.name
    base = base_url(request, settings)
    sub = Subscription(
        run_id=run_id, project_id=project_id, channel=body.channel, format=body.format, kinds=list(body.kinds),
        notices=sorted(set(body.notices)), notify_close=body.notify_close, language=body.language, unsub_token=secrets.token_urlsafe(32), base_url=base, failures=0,
        created_at=time.time(), created_ip=client_ip(request)[:64],
    )
    secret = None
    if body.channel == "webhook":
        if not body.url:
            raise ApiError(422, "a webhook subscription needs url", field="url")
        try:
            ssrf.vet(body.url, settings.webhook_allow_cidrs)
        except ssrf.Refused as exc:
            raise ApiError(422, str(exc), field="url") from None
        if body.format in chat.FORMATS:  # the platform's secret, or none: never shown again
            sub.target, sub.secret, sub.status = body.url, body.secret, "active"
        else:
            secret = new_secret()
            sub.target, sub.secret, sub.status = body.url, secret, "active"
    else:
        if not body.email or not EMAIL_RE.match(body.email):
            raise ApiError(422, "a valid email address is required", field="email")
        if not settings.smtp_host:
            raise ApiError(422, "this server does not send email (RUNCAST_SMTP_HOST is not set)", field="channel")
        sub.target, sub.status, sub.confirm_token = body.email, "pending", secrets.token_urlsafe(32)
    session.add(sub)
    session.flush()
    if body.channel == "email":
        t = messages(sub.language)
        what = t("run {run}", run=run_id) if run_id else t("project {project}", project=project_name)
        link = f"{base}/api/v1/subscriptions/confirm?token={sub.confirm_token}"
        try:
            email.send(settings, sub.target, "[runcast] " + t("Confirm alerts for {what}", what=what),
                       t("Someone (hopefully you) asked for Runcast alerts for {what}.", what=what) + "\n"
                       + t("Confirm with this link:") + f"\n\n{link}\n\n"
                       + t("Ignore this mail and nothing will be sent."),
                       unsubscribe_url=unsubscribe_url(sub), unsubscribe_label=t("Unsubscribe"))
        except Exception as exc:  # noqa: BLE001
            raise ApiError(502, f"could not send the confirmation mail: {type(exc).__name__}") from None
    out = _view(sub, run_id, project_name)
    if secret is not None:
        out["secret"] = secret
    return out


def _by_token(session: SessionDep, column: Any, token: str) -> Subscription:
    if not token or len(token) > 64:
        raise NotFound("subscription", field="token")
    sub = session.scalar(select(Subscription).where(column == token))
    if sub is None:
        raise NotFound("subscription", field="token")
    return sub


@router.get("/subscriptions/confirm", response_model=SubscriptionStatus, responses=error_responses(404, 422))
def confirm_subscription(session: SessionDep, token: Annotated[str, Query(max_length=64)]) -> dict[str, Any]:
    """The link in the confirmation mail: activates the email subscription."""
    sub = _by_token(session, Subscription.confirm_token, token)
    if sub.status == "pending":
        sub.status = "active"
    return {"id": sub.id, "status": sub.status}


@router.get("/subscriptions/unsubscribe", operation_id="unsubscribe_by_link", response_model=SubscriptionStatus,
            responses=error_responses(404, 422))
@router.post("/subscriptions/unsubscribe", operation_id="unsubscribe", response_model=SubscriptionStatus,
             responses=error_responses(404, 422))
def unsubscribe(session: SessionDep, token: Annotated[str, Query(max_length=64)]) -> dict[str, Any]:
    """The link in every delivery: deletes the subscription (no account needed)."""
    sub = _by_token(session, Subscription.unsub_token, token)
    sid = sub.id
    session.delete(sub)
    return {"id": sid, "status": "unsubscribed"}


@router.get("/subscriptions/{subscription_id}", response_model=SubscriptionView, response_model_exclude_unset=True,
            responses=error_responses(404, 422))
def get_subscription(session: SessionDep, subscription_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
                     token: Annotated[str, Query(max_length=64, description="The unsubscribe token.")]) -> dict[str, Any]:
    """One's own subscription (its status, e.g. disabled after failures), by its unsubscribe token."""
    sub = _by_token(session, Subscription.unsub_token, token)
    if sub.id != subscription_id:
        raise NotFound("subscription", field="token")
    project = session.scalar(select(Project.name).where(Project.id == sub.project_id)) if sub.project_id else None
    return _view(sub, sub.run_id, project)
