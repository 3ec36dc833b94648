"""``runcast user create|passwd|list`` and ``runcast project grant|revoke|members``: people and
their roles, written to the database of the current settings (as ``runcast token create``), so
an install with no OpenID Connect provider still has accounts (docs/auth.md#people)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from runcast_server.cli.ingest_cmds import open_database

user_app = typer.Typer(help="Accounts of people (local ones with a password; OpenID Connect ones sign in).",
                       no_args_is_help=True)
project_app = typer.Typer(help="People's roles in a project: owner, member, viewer.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(metavar="NAME", help="The account's name (what the sign-in form asks).")]
PasswordStdin = Annotated[bool, typer.Option("--password-stdin", help="Read the password from standard input "
                                             "(one line) instead of prompting.")]


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))


def _refuse(message: str, flag: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=flag)


@user_app.command("create")
def user_create_command(
    name: Name,
    password_stdin: PasswordStdin = False,
    no_password: Annotated[bool, typer.Option("--no-password", help="No local password: the person signs in "
                                              "with a provider only.")] = False,
    display_name: Annotated[str | None, typer.Option("--display-name", help="The name pages show (default: NAME).")]
    = None,
    email: Annotated[str | None, typer.Option("--email", help="An e-mail address (optional).")] = None,
) -> None:
    """Create an account NAME with a local password (prompted, or --password-stdin), stored as argon2id."""
    from runcast_server.core.settings import Settings
    from runcast_server.people.service import PeopleError, create_user

    password = None if no_password else _password(password_stdin)
    with open_database(Settings()) as db, db.scope() as session:
        try:
            user = create_user(session, name, display_name=display_name, email=email, password=password)
        except PeopleError as exc:
            raise _refuse(str(exc), "NAME" if exc.field == "name" else "--password-stdin") from exc
        typer.echo(f"user {user.name} created")


@user_app.command("passwd")
def user_passwd_command(name: Name, password_stdin: PasswordStdin = False) -> None:
    """Set the local password of account NAME (its sessions live on until they expire)."""
    from runcast_server.core.settings import Settings
    from runcast_server.people.service import PeopleError, find_user, set_password

    password = _password(password_stdin)
    with open_database(Settings()) as db, db.scope() as session:
        user = find_user(session, name)
        if user is None:
            raise _refuse(f"no user {name!r}", "NAME")
        try:
            set_password(session, user, password)
        except PeopleError as exc:
            raise _refuse(str(exc), "--password-stdin") from exc
        typer.echo(f"password of {name} set")


@user_app.command("list")
def user_list_command() -> None:
    """Every account: name, display name, whether it has a local password, its projects and roles."""
    from runcast_server.core.settings import Settings
    from runcast_server.people.service import all_users, projects_of

    with open_database(Settings()) as db, db.scope() as session:
        for user in all_users(session):
            roles = ", ".join(f"{p}:{r}" for p, r in projects_of(session, user.id)) or "-"
            local = "password" if user.password_hash else "provider"
            typer.echo(f"{user.name:<24} {local:<9} {roles}  ({user.display_name})")


@project_app.command("grant")
def grant_command(
    project: Annotated[str, typer.Argument(metavar="PROJECT", help="The project (created if missing).")],
    name: Name,
    role: Annotated[str, typer.Option("--role", help="owner, member or viewer.")] = "member",
) -> None:
    """Give account NAME a role in PROJECT (replacing the one it had)."""
    from runcast.wire.events import PROJECT_RE

    from runcast_server.core.auth import get_or_create_project
    from runcast_server.core.settings import Settings
    from runcast_server.people.models import ROLES
    from runcast_server.people.service import find_user, grant

    if role not in ROLES:
        raise _refuse(f"choose one of {', '.join(ROLES)}", "--role")
    if not PROJECT_RE.match(project):
        raise _refuse("1-100 characters of A-Z, a-z, 0-9, '.', '_' or '-'", "PROJECT")
    with open_database(Settings()) as db, db.scope() as session:
        user = find_user(session, name)
        if user is None:
            raise _refuse(f"no user {name!r} (runcast user list)", "NAME")
        grant(session, get_or_create_project(session, project), user, role)
        typer.echo(f"{name} is now {role} of {project}")


@project_app.command("revoke")
def revoke_command(
    project: Annotated[str, typer.Argument(metavar="PROJECT")], name: Name,
) -> None:
    """Take account NAME's role in PROJECT away."""
    from sqlalchemy import select

    from runcast_server.core.models import Project
    from runcast_server.core.settings import Settings
    from runcast_server.people.service import find_user, revoke

    with open_database(Settings()) as db, db.scope() as session:
        user = find_user(session, name)
        found = session.scalar(select(Project).where(Project.name == project))
        if user is None or found is None or not revoke(session, found, user):
            raise _refuse(f"{name!r} has no role in {project!r}", "NAME")
        typer.echo(f"{name} has no role in {project} any more")
