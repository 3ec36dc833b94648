"""nginx (Debian's binary) in front of Runcast API processes, started by the tests.

The site is ``deploy/nginx/runcast.conf.template`` rendered as envsubst would render it;
around it goes the smallest top-level configuration that gives nginx its own prefix,
pid file, logs and temp directories, so it runs next to anything else on free loopback
ports. Run as root, the whole nginx (master included) runs as ``nobody``: nothing in the
template needs privileges.
"""

from __future__ import annotations

import os
import pwd
import tempfile
from collections.abc import Sequence
from pathlib import Path
from string import Template

import httpx
from services import (
    ROOT,
    Process,
    ServiceError,
    child_env,
    find_binary,
    free_port,
    wait_until,
)

TEMPLATE = ROOT / "deploy" / "nginx" / "runcast.conf.template"

MAIN = """\
daemon off;
master_process on;
worker_processes 2;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1000; }}
http {{
    default_type application/octet-stream;
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    include {prefix}/runcast.conf;
}}
"""


def render(template: str, values: dict[str, str]) -> str:
    """What envsubst restricted to RUNCAST_* does: nginx's own ``$host`` etc. stay as they are."""
    missing = {m.group("braced") for m in Template.pattern.finditer(template)
               if (m.group("braced") or "").startswith("RUNCAST_")} - set(values)
    if missing:
        raise ValueError(f"no value for {sorted(missing)}")
    return Template(template).safe_substitute(values)


class Nginx:
    """One nginx master + workers on a free port; ``url`` is its base address."""

    def __init__(self, api_urls: Sequence[str], files_root: Path, log_dir: Path) -> None:
        self.binary = find_binary("nginx", "/usr/sbin/nginx", apt="nginx")
        self.prefix = Path(tempfile.mkdtemp(prefix="runcast-nginx-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / "nginx.log"
        (self.prefix / "tmp").mkdir()
        servers = " ".join(f"server {u.removeprefix('http://')} max_fails=1 fail_timeout=5s;" for u in api_urls)
        site = render(TEMPLATE.read_text(), {
            "RUNCAST_API_SERVERS": servers,
            "RUNCAST_LISTEN": f"127.0.0.1:{self.port}",
            "RUNCAST_SERVER_NAME": "_",
            "RUNCAST_FILES_ROOT": str(files_root).rstrip("/") + "/",
        })
        (self.prefix / "runcast.conf").write_text(site)
        (self.prefix / "nginx.conf").write_text(MAIN.format(prefix=self.prefix))
        self.argv = [self.binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"),
                     "-e", str(self.prefix / "error.log")]
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for path in [self.prefix, *self.prefix.rglob("*")]:
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
            os.chmod(self.prefix, 0o755)
            self.as_user = [find_binary("runuser", "/usr/sbin/runuser", apt="util-linux"), "-u", "nobody", "--"]
        self.proc: Process | None = None

    def check_config(self) -> None:
        import subprocess

        res = subprocess.run([*self.as_user, *self.argv, "-t"], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise ServiceError(f"nginx -t refused the configuration:\n{res.stderr}")

    def start(self) -> Nginx:
        self.check_config()
        self.proc = Process("nginx", [*self.as_user, *self.argv], child_env({}), self.log_path)

        def up() -> bool:
            assert self.proc is not None
            self.proc.check_alive("starting")
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200

        wait_until(up, 30, f"nginx on {self.url}")
        return self

    def error_log(self) -> str:
        try:
            return (self.prefix / "error.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=10)
            self.proc = None
        import shutil

        shutil.rmtree(self.prefix, ignore_errors=True)
