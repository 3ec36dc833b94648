"""``runcast demo``: the embedded server and a real small training run streaming to it, in one command.

What it does, in order: picks a persistent data directory (``RUNCAST_DATA_DIR`` by default,
the one ``runcast serve`` and ``runcast token create`` use, so a second demo still shows the
earlier runs), runs the embedded default there (SQLite, eager ingest, the in-process hub) on
127.0.0.1:PORT in a thread of this process, makes a token of project ``demo`` and prints it
(with the two variables that let a script of yours log to this server), and starts the reference trainer (``runcast train``: a tiny GPT on local
data, CPU) as a child process that broadcasts to it. It prints the dashboard and run page
addresses and opens nothing. Ctrl-C (SIGINT) or SIGTERM stops everything: the trainer gets
one SIGINT (its run is finished as "killed", its last points flushed), then SIGTERM and
SIGKILL if it lingers; open live streams are ended and the server shuts down; exit code 0.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from runcast_server.core.settings import Settings

TRAINER_STOP_S = 20.0  # a SIGINT'd trainer finishes its run within this, else it is terminated
RUN_LINE = re.compile(r"as run (\S+)")


class _Stop(Exception):
    """SIGTERM (or SIGINT) asked the demo to stop."""


def demo_command(
    port: int = typer.Option(8000, min=1, max=65535, help="Port of the dashboard and API on 127.0.0.1."),
    steps: int = typer.Option(2000, min=1, help="Optimizer steps of the demo training run."),
    no_train: bool = typer.Option(False, "--no-train", help="Only serve the dashboard (and earlier runs)."),
    data_dir: Path | None = typer.Option(  # noqa: B008 - typer declares options as defaults
        None, help="Where the demo's database and checkpoints live (default: RUNCAST_DATA_DIR, the directory of "
        "`runcast serve` and `runcast token create`; kept between demos)."
    ),
) -> None:
    """Serve the dashboard and stream a real tiny-GPT training run to it: the first command to try.

    Prints the run page address (http://127.0.0.1:PORT/runs/<id>); Ctrl-C stops the trainer
    and the server. No Redis or PostgreSQL needed: this is the embedded default.
    """
    settings = _demo_settings(data_dir)
    data = settings.data_dir
    if not _port_free(port):
        typer.echo(f"port {port} on 127.0.0.1 is in use; pick another with --port", err=True)
        raise typer.Exit(2)
    token = _demo_token(settings)
    base = f"http://127.0.0.1:{port}"

    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if not stopping.is_set():
            stopping.set()
            raise _Stop(signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    server = trainer = None
    try:
        server = _Server(port, settings)
        server.start()
        typer.echo(f"Runcast demo: dashboard at {base}/  (data in {data})")
        typer.echo(
            "Log a run of your own to it (a token of project 'demo' in this database, shown once):\n"
            f"  export RUNCAST_SERVER={base} RUNCAST_TOKEN={token}"
        )
        if no_train:
            typer.echo("serving only (--no-train); Ctrl-C to stop")
        else:
            trainer = _Trainer(base, token, steps, settings)
            trainer.start()
        while True:
            if trainer is not None and trainer.popen is not None and trainer.popen.poll() is not None:
                code = trainer.popen.returncode
                typer.echo(
                    f"training {'finished' if code == 0 else f'exited with status {code}'}; "
                    "the dashboard stays up: Ctrl-C to stop"
                )
                trainer = None
            time.sleep(0.2)
    except (_Stop, KeyboardInterrupt):
        stopping.set()
        typer.echo("\nstopping ...")
    finally:
        # Stop signals from interrupting the cleanup itself.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        try:
            if trainer is not None:
                trainer.stop()
            if server is not None:
                server.stop()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    typer.echo("stopped")


def _demo_settings(data_dir: Path | None) -> Settings:
    """The demo server's settings: the embedded default (no Redis, no external database) on the
    demo's data dir, whatever RUNCAST_DATABASE_URL or RUNCAST_REDIS_URL say; the other RUNCAST_*
    variables apply. Passed to what needs them; this process's environment is left as it is."""
    from runcast_server.core.settings import Settings

    data = (data_dir or Settings().data_dir).expanduser().resolve()
    data.mkdir(parents=True, exist_ok=True)
    return Settings(data_dir=data, database_url=None, redis_url=None)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _demo_token(settings: Settings) -> str:
    from runcast_server.core import migrate
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import Database

    migrate.upgrade(settings.sqlalchemy_url)
    db = Database.open(settings.sqlalchemy_url)
    try:
        with db.scope() as session:
            return create_token(session, "demo", label="runcast demo")
    finally:
        db.engine.dispose()


class _Server:
    """uvicorn on its own event loop in a thread of this process (signals stay with the main thread)."""

    def __init__(self, port: int, settings: Settings) -> None:
        import asyncio

        import uvicorn

        from runcast_server.app import create_app

        self.loop = asyncio.new_event_loop()
        self.app = create_app(settings)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="runcast-demo-server", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.loop.run_until_complete(self.server.serve())
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self.error = exc
        finally:
            self.loop.close()

    def start(self, timeout: float = 60) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise typer.Exit(1) from self.error
            time.sleep(0.05)

    def stop(self) -> None:
        if self.thread.is_alive():
            # End open live streams first: uvicorn's graceful shutdown waits for every response.
            self.loop.call_soon_threadsafe(self.app.state.context.registry.close_all)
            self.server.should_exit = True
            self.thread.join(timeout=30)


def _checkpoint_dir(settings: Settings, stamp: str) -> Path:
    """Under the server's storage root, so the run page can offer the checkpoints for download."""
    return settings.checkpoint_root / "demo" / stamp


class _Trainer:
    """``runcast train`` in a child process (own process group), its output echoed with a prefix."""

    def __init__(self, base: str, token: str, steps: int, settings: Settings) -> None:
        self.base = base
        data = settings.data_dir
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.argv = [
            sys.executable, "-m", "runcast.cli.main", "train",
            "--server", base, "--project", "demo", "--name", f"demo-tinygpt-{stamp}",
            "--max-steps", str(steps), "--out-dir", str(_checkpoint_dir(settings, stamp)),
            "--eval-interval", str(max(10, min(50, steps // 10))),
            "--ckpt-interval", str(max(20, min(250, steps // 4))),
        ]  # fmt: skip
        inherited = {k: v for k, v in os.environ.items() if k not in ("RUNCAST_DATABASE_URL", "RUNCAST_REDIS_URL")}
        self.env = {
            **inherited,
            "RUNCAST_DATA_DIR": str(data),  # the demo server's, as before
            "RUNCAST_TOKEN": token,  # in the environment, not on the command line (ps shows argv)
            "RUNCAST_SPOOL_DIR": str(data / "spool"),
            "PYTHONUNBUFFERED": "1",
        }
        self.popen: subprocess.Popen[str] | None = None
        self.run_id: str | None = None

    def start(self) -> None:
        typer.echo(f"starting a real training run: tiny GPT on CPU, {self.argv[self.argv.index('--max-steps') + 1]} steps")
        self.popen = subprocess.Popen(
            self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip
        threading.Thread(target=self._echo, name="runcast-demo-trainer-output", daemon=True).start()

    def _echo(self) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        for line in self.popen.stdout:
            typer.echo(f"[train] {line.rstrip()}")
            if self.run_id is None and (m := RUN_LINE.search(line)):
                self.run_id = m.group(1)
                typer.echo(f"\n  Watch it live: {self.base}/runs/{self.run_id}\n")

    def stop(self) -> None:
        """SIGINT (the run is finished as "killed", queued points flushed), then SIGTERM, then SIGKILL."""
        p = self.popen
        if p is None or p.poll() is not None:
            return
        for sig, wait in ((signal.SIGINT, TRAINER_STOP_S), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        typer.echo(f"trainer stopped (status {p.returncode})")
