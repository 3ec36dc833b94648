"""Group-chat robots of Feishu/Lark, DingTalk and WeCom: each platform's message, signature,
answer and secret-bearing URL.

- **Feishu/Lark** custom bot: an ``interactive`` card (a plain-text title and body, a button
  to the run); with a signing secret, ``timestamp`` (seconds) and ``sign`` =
  base64(HMAC-SHA256(key = "<timestamp>\\n<secret>", message = b"")) in the body.
- **DingTalk** custom robot: ``markdown``; with a signing secret, ``timestamp`` (milliseconds)
  and ``sign`` = base64(HMAC-SHA256(key = secret, message = "<timestamp>\\n<secret>")) as
  query parameters.
- **WeCom** group robot: ``markdown``; the ``key`` in its URL is its only secret.

Each answers HTTP 200 with an error code in JSON (``code``/``StatusCode``, ``errcode``): a
non-zero one is a failed delivery, retried only when waiting can help (rate limits, a busy
platform). Nobody is ever mentioned: no at-all flag is set, and text a trainer chose (project,
run and metric names) is made inert for the platform's markup (:func:`inert`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

FORMATS: Final = ("feishu", "dingtalk", "wecom")
SIGNED: Final = ("feishu", "dingtalk")  # the platforms with an optional signing secret
# The query parameter (or, for Feishu, the path's last part) that lets anyone post to the group.
URL_SECRETS: Final = {"dingtalk": "access_token", "wecom": "key"}
# Codes worth retrying later: rate limits and a busy platform.
RETRYABLE: Final = {
    "feishu": {11232, 9499},  # frequency limited; bad request at the gateway under load
    "dingtalk": {130101, -1},  # more than 20 messages a minute; system busy
    "wecom": {45009, -1},  # more than 20 messages a minute; system busy
}
ZWSP: Final = "\u200b"
# After each of these a zero-width space: no mention (@all, <at ...>, <@all>), tag, link, image or
# emphasis can form, and no bare URL is linked, yet the text reads as typed.
_ACTIVE: Final = re.compile(r"([@<>\[\]()!*_`#~|\\]|:(?=//))")
MAX_TEXT: Final = 3000  # WeCom's markdown takes 4096 bytes; the others more


@dataclass(frozen=True)
class ChatMessage:
    """What a notification says, already in the subscriber's language; ``title`` and ``text``
    still hold trainer text (made inert here), the links and labels are the server's."""

    title: str
    text: str
    link: str | None
    link_label: str
    unsubscribe: str
    unsubscribe_label: str
    closed: bool


@dataclass(frozen=True)
class Outgoing:
    url: str
    body: bytes


def inert(text: str) -> str:
    """``text`` shown as typed but acting as nothing in the platforms' text and markdown."""
    return _ACTIVE.sub(lambda m: m.group(1) + ZWSP, text)


def feishu_sign(secret: str, timestamp: int) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def _link(label: str, url: str) -> str:
    return f"[{label}]({url.replace(')', '%29').replace(' ', '%20')})"


def _markdown(msg: ChatMessage) -> str:
    links = [_link(msg.unsubscribe_label, msg.unsubscribe)]
    if msg.link:
        links.insert(0, _link(msg.link_label, msg.link))
    return f"**{inert(msg.title)}**\n\n{inert(msg.text)[:MAX_TEXT]}\n\n" + " · ".join(links)


def request(fmt: str, url: str, secret: str | None, msg: ChatMessage, now: float) -> Outgoing:
    """The POST of one attempt (signed now when the subscription has a secret)."""
    body: dict[str, Any]
    if fmt == "feishu":
        plain = {"tag": "plain_text"}
        actions = [{"tag": "button", "text": {**plain, "content": msg.link_label}, "url": msg.link, "type": "primary"}]
        actions = actions if msg.link else []
        actions.append({"tag": "button", "text": {**plain, "content": msg.unsubscribe_label},
                        "url": msg.unsubscribe, "type": "default"})
        body = {"msg_type": "interactive", "card": {
            "header": {"title": {**plain, "content": inert(msg.title)}, "template": "green" if msg.closed else "red"},
            "elements": [{"tag": "div", "text": {**plain, "content": inert(msg.text)[:MAX_TEXT]}},
                         {"tag": "action", "actions": actions}],
        }}
        if secret:
            stamp = int(now)
            body = {"timestamp": str(stamp), "sign": feishu_sign(secret, stamp), **body}
    elif fmt == "dingtalk":
        body = {"msgtype": "markdown", "markdown": {"title": inert(msg.title)[:100], "text": _markdown(msg)}}
        if secret:
            stamp = int(now * 1000)
            url = _with_query(url, {"timestamp": str(stamp), "sign": dingtalk_sign(secret, stamp)})
    elif fmt == "wecom":
        body = {"msgtype": "markdown", "markdown": {"content": _markdown(msg)}}
    else:
        raise ValueError(f"not a chat format: {fmt}")
    return Outgoing(url, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())


def _with_query(url: str, extra: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in extra]
    return urlunsplit(parts._replace(query=urlencode([*query, *extra.items()])))


def failure(fmt: str, status: int, body: bytes) -> tuple[str | None, bool]:
    """(the error, whether to retry) of a platform's answer; (None, False) for a delivered message."""
    if not 200 <= status < 300:
        return f"HTTP {status}", True
    try:
        answer = json.loads(body)
    except ValueError:
        return "the answer is not JSON", True
    if not isinstance(answer, dict):
        return "the answer is not a JSON object", True
    if fmt == "feishu":
        code = answer.get("code", answer.get("StatusCode", 0))
        message = answer.get("msg", answer.get("StatusMessage", ""))
    else:
        code, message = answer.get("errcode", 0), answer.get("errmsg", "")
    if code in (0, None):
        return None, False
    return f"{fmt} error {code}: {str(message)[:300]}", code in RETRYABLE[fmt]


def mask(fmt: str, url: str) -> str:
    """``url`` with its group's secret hidden but for its last 4 characters (Feishu: the path's
    last part; DingTalk: ``access_token``; WeCom: ``key``); other formats' URLs as they are."""
    if fmt not in FORMATS:
        return url
    parts = urlsplit(url)
    if fmt == "feishu":
        head, _, token = parts.path.rpartition("/")
        return urlunsplit(parts._replace(path=f"{head}/{_hide(token)}"))
    name = URL_SECRETS[fmt]
    query = [(k, _hide(v) if k == name else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*")))


def scrub(fmt: str, url: str, text: str) -> str:
    """``text`` (an error, a log line) without the URL's secret."""
    secret = url_secret(fmt, url)
    return text.replace(secret, _hide(secret)) if secret else text


def url_secret(fmt: str, url: str) -> str | None:
    """The secret part of a chat robot's URL (None for another format, or a URL without one)."""
    parts = urlsplit(url)
    if fmt == "feishu":
        return parts.path.rpartition("/")[2] or None
    name = URL_SECRETS.get(fmt)
    return dict(parse_qsl(parts.query)).get(name) if name else None


def _hide(secret: str) -> str:
    return "****" + secret[-4:] if len(secret) > 8 else "****"
