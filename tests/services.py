"""Real services for the tests: PostgreSQL, Redis, Celery workers and API processes.

Everything here starts a real server or process on a free 127.0.0.1 port inside a
temporary directory, and knows how to stop it. Nothing is mocked. The fixtures in
``tests/conftest.py`` wrap these classes; use the fixtures, not the classes, in tests.

Every process started here is recorded in ``_LIVE`` and killed (its whole process
group) by :func:`stop_all`, which conftest calls at the end of the session and which
also runs at interpreter exit, so a crashed or interrupted session leaks nothing.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
# The console scripts of the venv that runs pytest (scripts/test uses .venv/bin/python).
BIN = Path(sys.executable).parent


class ServiceError(RuntimeError):
    """A service could not be found, started or reached; the message says which and why."""


# --- small helpers ----------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1
) -> Any:
    """Call ``check`` until it returns something truthy; raise ServiceError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except ServiceError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep polling, report the last one
            last_exc = exc
        else:
            if result:
                return result
        time.sleep(interval)
    detail = f" (last error: {last_exc!r})" if last_exc else ""
    raise ServiceError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def find_binary(name: str, *candidates: str, apt: str) -> str:
    """The path of ``name``: on PATH or at one of ``candidates`` (globs allowed)."""
    found = shutil.which(name)
    if found:
        return found
    for pattern in candidates:
        for path in sorted(glob.glob(pattern), reverse=True):
            if os.access(path, os.X_OK):
                return path
    raise ServiceError(
        f"{name} not found (looked on PATH and in {', '.join(candidates) or 'nowhere else'}); "
        f"install it with `apt-get install {apt}` (.ci/run does this on a fresh machine)"
    )


def tail(path: Path, max_chars: int = 20_000) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return text if len(text) <= max_chars else "...\n" + text[-max_chars:]


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without any RUNCAST_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env["PYTHONUNBUFFERED"] = "1"
    # The SDK's system sampler adds points; tests that count points turn it on themselves.
    env["RUNCAST_SYSTEM_INTERVAL"] = "off"
    env.update(extra)
    return env


# --- processes ------------------------------------------------------------------------------

_LIVE: list[Process] = []


class Process:
    """A child process in its own process group, logging to a file.

    ``stop()`` sends SIGTERM to the group and waits (then SIGKILL); ``kill()`` is an
    immediate SIGKILL of the whole group, the crash a fault test wants.
    """

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in _reap
        self._offset = self._log.tell()  # a restart may append to an earlier log
        self._log.write(f"$ {' '.join(argv)}\n".encode())
        self._log.flush()
        self.popen = subprocess.Popen(
            argv,
            env=dict(env),
            cwd=str(cwd or ROOT),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.popen.pid
        _LIVE.append(self)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return tail(self.log_path)

    def output(self) -> str:
        """What this start of the process has written (the log may hold earlier starts)."""
        with open(self.log_path, "rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    def check_alive(self, what: str) -> None:
        if not self.running:
            raise ServiceError(
                f"{self.name} exited with code {self.popen.returncode} while {what}; log:\n{self.log()}"
            )

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the process and everything in its group, now."""
        self._signal_group(signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._reap()

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (a warm shutdown for Celery and uvicorn), SIGKILL after ``timeout``."""
        if self.running:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        # Children (prefork workers, uvicorn workers) may outlive the leader.
        self._signal_group(signal.SIGKILL)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reap()

    def _reap(self) -> None:
        if not self._log.closed:
            self._log.close()
        if self in _LIVE:
            _LIVE.remove(self)

    def __repr__(self) -> str:
        return f"<Process {self.name} pid={self.pid} running={self.running}>"


def stop_all() -> None:
    """Kill every process this module started and that is still recorded as live."""
    # Iterate over copies: stop() removes each entry from its list.
    for proc in _LIVE[:]:
        try:
            proc.stop(timeout=5)
        except Exception:  # noqa: BLE001, S110 - best effort at teardown
            pass
    for server in _SERVERS[:]:
        try:
            server.stop()
        except Exception:  # noqa: BLE001, S110 - best effort at teardown
            pass


atexit.register(stop_all)

_SERVERS: list[PostgresServer | RedisServer] = []


# --- PostgreSQL -----------------------------------------------------------------------------


class PostgresServer:
    """A throwaway PostgreSQL cluster on a free port, for tests only (fsync=off).

    When running as root the cluster is made and run by the ``postgres`` user (initdb
    refuses root) in a directory under the system temp dir that user can reach.
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self.initdb = find_binary(
            "initdb", "/usr/lib/postgresql/*/bin/initdb", apt="postgresql"
        )
        bindir = Path(self.initdb).resolve().parent
        self.pg_ctl = str(bindir / "pg_ctl")
        if not os.access(self.pg_ctl, os.X_OK):
            self.pg_ctl = find_binary(
                "pg_ctl", "/usr/lib/postgresql/*/bin/pg_ctl", apt="postgresql"
            )
        self.port = free_port()
        self.dir = Path(
            tempfile.mkdtemp(prefix="runcast-pg-", dir=str(base_dir) if base_dir else "/tmp")
        )
        self.data = self.dir / "data"
        self.sockets = self.dir / "sock"
        self.log_path = self.dir / "postgres.log"
        self.user = "postgres"
        self._as_other: list[str] = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise ServiceError(
                    "running as root, but there is no `postgres` user to run the cluster as; "
                    "install the postgresql package (it creates that user)"
                ) from exc
            runuser = find_binary("runuser", "/usr/sbin/runuser", apt="util-linux")
            self._as_other = [runuser, "-u", "postgres", "--"]
            os.chmod(self.dir, 0o755)
            self.sockets.mkdir()
            for p in (self.dir, self.sockets):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
            self.sockets.mkdir()
        self.started = False

    def _run(self, argv: list[str], what: str, timeout: float = 120) -> None:
        res = subprocess.run(
            self._as_other + argv,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(self.dir),
        )
        if res.returncode != 0:
            raise ServiceError(
                f"{what} failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}\n"
                f"server log:\n{tail(self.log_path)}"
            )

    def start(self) -> PostgresServer:
        self._run(
            [
                self.initdb,
                "-D", str(self.data),
                "-U", "postgres",
                "-A", "trust",
                "-E", "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )
        opts = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.sockets}",
                # Test-only settings: durability is not what these tests measure.
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=300",
                "-c shared_buffers=128MB",
            ]
        )
        _SERVERS.append(self)
        self._opts = opts
        self._run(
            [self.pg_ctl, "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "60", "-o", opts, "start"],
            "pg_ctl start",
        )
        self.started = True
        return self

    def pause(self) -> None:
        """Stop the server, keeping its data (an outage); ``resume()`` starts it again on the same port."""
        self._run([self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"], "pg_ctl stop", timeout=60)

    def resume(self) -> None:
        self._run(
            [self.pg_ctl, "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "60", "-o", self._opts, "start"],
            "pg_ctl start",
        )

    def stop(self) -> None:
        if self.started:
            self.started = False
            try:
                self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"], "pg_ctl stop", timeout=60)
            finally:
                if self in _SERVERS:
                    _SERVERS.remove(self)
                shutil.rmtree(self.dir, ignore_errors=True)
        elif self in _SERVERS:
            _SERVERS.remove(self)

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        """Run one statement in autocommit (CREATE/DROP DATABASE need that)."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=database, autocommit=True
        ) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def create_database(self, name: str | None = None, template: str | None = None) -> str:
        """A new database (a copy of ``template`` when given); returns its name."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        clause = f' TEMPLATE "{template}"' if template else ""
        self.execute(f'CREATE DATABASE "{name}"{clause}')
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- Redis ------------------------------------------------------------------------------------


class RedisServer:
    """A redis-server child process (no persistence) on a free port."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self.binary = find_binary("redis-server", "/usr/bin/redis-server", apt="redis-server")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="runcast-redis-", dir=str(base_dir) if base_dir else None))
        self.proc: Process | None = None

    def start(self) -> RedisServer:
        self.proc = Process(
            "redis",
            [
                self.binary,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--save", "",
                "--appendonly", "no",
                "--daemonize", "no",
                "--dir", str(self.dir),
            ],
            env=child_env({}),
            log_path=self.dir / "redis.log",
            cwd=self.dir,
        )
        _SERVERS.append(self)
        wait_until(self._ping, 20, f"redis-server on port {self.port}")
        return self

    def pause(self) -> None:
        """Stop redis-server (an outage); ``resume()`` starts it again, empty, on the same port."""
        assert self.proc is not None
        self.proc.stop(timeout=5)

    def resume(self) -> None:
        self.proc = Process(self.proc.name, self.proc.argv, child_env({}), self.dir / "redis.log", cwd=self.dir)  # type: ignore[union-attr]
        wait_until(self._ping, 20, f"redis-server on port {self.port}")

    def _ping(self) -> bool:
        assert self.proc is not None
        self.proc.check_alive("starting")
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis.from_url(self.url(db))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=5)
            self.proc = None
        if self in _SERVERS:
            _SERVERS.remove(self)
        shutil.rmtree(self.dir, ignore_errors=True)


# --- Runcast processes ----------------------------------------------------------------------


def runcast_has_command(name: str) -> bool:
    """Whether the installed ``runcast`` CLI knows the verb ``name`` (checked once each)."""
    if name not in _COMMANDS:
        res = subprocess.run(
            [str(BIN / "runcast"), name, "--help"], check=False, capture_output=True, text=True, timeout=60,
            env=child_env({}),
        )
        _COMMANDS[name] = res.returncode == 0
    return _COMMANDS[name]


_COMMANDS: dict[str, bool] = {}


def worker_argv(concurrency: int = 1, pool: str = "solo", hostname: str | None = None) -> list[str]:
    """The command line of a Celery worker: ``runcast worker`` (``hostname`` is only used by the
    plain ``celery`` fallback for checkouts without that command)."""
    if runcast_has_command("worker"):
        return [str(BIN / "runcast"), "worker", "--pool", pool, "--concurrency", str(concurrency)]
    argv = [
        str(BIN / "celery"), "-A", "runcast_server.core.celery_app", "worker",
        "--pool", pool, "--concurrency", str(concurrency), "--loglevel", "INFO", "--without-gossip",
        "--without-mingle", "--without-heartbeat",
    ]
    if hostname:
        argv += ["--hostname", hostname]
    return argv


def start_worker(
    env: Mapping[str, str],
    log_path: Path,
    *,
    concurrency: int = 1,
    pool: str = "solo",
    name: str = "worker",
    timeout: float = 60,
) -> Process:
    """Start a Celery worker and wait until it consumes (its 'ready.' log line)."""
    proc = Process(name, worker_argv(concurrency, pool, f"{name}-{uuid.uuid4().hex[:6]}@%h"), child_env(env), log_path)
    try:
        wait_until(
            lambda: proc.check_alive("starting") or " ready." in proc.output(),
            timeout,
            f"{name} to report ready (log: {log_path})",
            interval=0.2,
        )
    except BaseException:
        proc.stop(timeout=5)
        raise
    return proc


def create_token(env: Mapping[str, str], project: str) -> str:
    """A new token of ``project`` in the database ``env`` names (``runcast token create``)."""
    out = subprocess.run([str(BIN / "runcast"), "token", "create", "--project", project], env=child_env(env),
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def start_api(
    env: Mapping[str, str],
    log_path: Path,
    *,
    port: int | None = None,
    name: str = "api",
    timeout: float = 60,
) -> tuple[Process, str]:
    """Start ``runcast serve --port P``; returns the process and its base URL once /healthz is 200."""
    port = port or free_port()
    proc = Process(
        name,
        [str(BIN / "runcast"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        child_env(env),
        log_path,
    )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        proc.check_alive("starting")
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200

    try:
        wait_until(healthy, timeout, f"{name} /healthz at {base} (log: {log_path})", interval=0.2)
    except BaseException:
        proc.stop(timeout=5)
        raise
    return proc, base
