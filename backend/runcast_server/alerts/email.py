"""Email over SMTP (``RUNCAST_SMTP_*``): confirmation mails and alert mails, both with an
unsubscribe link (also as a ``List-Unsubscribe`` header)."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

from runcast_server.core.settings import Settings


class EmailNotConfigured(RuntimeError):
    """``RUNCAST_SMTP_HOST`` is not set."""


def send(settings: Settings, to: str, subject: str, body: str, *, unsubscribe_url: str | None = None,
         unsubscribe_label: str = "Unsubscribe") -> None:
    """Send one plain-text mail (UTF-8: any language); the unsubscribe link, when given, ends it."""
    if not settings.smtp_host:
        raise EmailNotConfigured("email needs RUNCAST_SMTP_HOST")
    msg = EmailMessage()
    msg["From"] = settings.smtp_from
    msg["To"] = to
    msg["Subject"] = subject
    if unsubscribe_url:
        msg["List-Unsubscribe"] = f"<{unsubscribe_url}>"
        body = f"{body}\n\n--\n{unsubscribe_label}: {unsubscribe_url}\n"
    msg.set_content(body)
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.webhook_timeout_s) as smtp:
        if settings.smtp_starttls:
            smtp.starttls()
        if settings.smtp_user:
            smtp.login(settings.smtp_user, settings.smtp_password or "")
        smtp.send_message(msg)
