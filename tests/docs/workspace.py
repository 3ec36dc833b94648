"""One doc page's world: a real embedded ``runcast serve`` (``RUNCAST_DATA_DIR`` in a temp dir), a
token from ``runcast token create``, a home directory, and a working directory where the
checkout's files can be read and the examples' files are written."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import services
from services import BIN, Process

from docs.markdown import ROOT


@dataclass
class Workspace:
    """Where a page's examples run, and the values its placeholders stand for."""

    doc: str
    base: Path
    project: str
    url: str = ""
    token: str = ""
    processes: list[Process] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def cwd(self) -> Path:
        return self.base / "work"

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    @property
    def logs(self) -> Path:
        return self.base / "logs"

    def values(self) -> dict[str, str]:
        """What a substitution may use: ``{url}``, ``{token}``, ``{data_dir}``, ``{storage}``, ``{home}``,
        ``{cwd}``, ``{bin}``, ``{site}`` (the venv's site-packages)."""
        site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
        return {"url": self.url, "token": self.token, "data_dir": str(self.data_dir),
                "storage": str(self.data_dir / "storage"), "home": str(self.home), "cwd": str(self.cwd),
                "bin": str(BIN), "site": site}  # fmt: skip

    def env(self, client: bool = True, **extra: str) -> dict[str, str]:
        """The examples' environment: no RUNCAST_* of the test process; the server's data directory
        (for the commands that run on its machine); with ``client``, RUNCAST_SERVER and RUNCAST_TOKEN."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
        env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(self.home), PYTHONUNBUFFERED="1",
                   RUNCAST_DATA_DIR=str(self.data_dir))  # fmt: skip
        if client and self.url:
            env.update(RUNCAST_SERVER=self.url, RUNCAST_TOKEN=self.token)
        env.update(extra)
        return env

    def prepare(self) -> None:
        """The directories; the checkout's top-level files and folders linked into the working directory."""
        for path in (self.home, self.cwd, self.data_dir, self.logs):
            path.mkdir(parents=True, exist_ok=True)
        for entry in ROOT.iterdir():
            if not entry.name.startswith(".") and not (self.cwd / entry.name).exists():
                (self.cwd / entry.name).symlink_to(entry)

    def serve(self, **server_env: str) -> None:
        """``runcast serve`` on a free port, and a token of the page's project from ``runcast token create``."""
        env = {"RUNCAST_DATA_DIR": str(self.data_dir), "HOME": str(self.home), **server_env}
        process, self.url = services.start_api(env, self.logs / "serve.log", name=f"serve {self.doc}")
        self.processes.append(process)
        created = subprocess.run(
            [str(BIN / "runcast"), "token", "create", "--project", self.project],
            env=self.env(client=False), capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        self.token = created.stdout.strip()

    def start(self, argv: list[str], name: str) -> None:
        """A background process of the page (a training job that keeps logging), stopped with it."""
        self.processes.append(Process(name, argv, self.env(), self.logs / f"{name}.log", cwd=self.cwd))

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop(timeout=10)
        self.processes.clear()
