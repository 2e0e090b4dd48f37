"""PowerDNS on loopback for tests: the recursor and the authoritative server (gsqlite3
and its HTTP API), each a ServerProc used as a context manager (tests.support.servers).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import ServerProc, free_port, serving, spawn

PDNS_API_KEY = "soak-test-key"  # both servers' HTTP API


# ---------------------------------------------------------------- pdns-recursor


@contextlib.contextmanager
def pdns_recursor(tmp: Path, upstream_port: int) -> Iterator[ServerProc]:
    port, web_port = free_port(), free_port()
    (tmp / "recursor.conf").write_text(
        "\n".join(
            [
                "local-address=127.0.0.1",
                f"local-port={port}",
                f"forward-zones-recurse=.=127.0.0.1:{upstream_port}",
                "hint-file=no",
                "security-poll-suffix=",
                "dnssec=process-no-validate",
                "daemon=no",
                "write-pid=no",
                f"socket-dir={tmp}",
                "webserver=yes",
                "webserver-address=127.0.0.1",
                f"webserver-port={web_port}",
                "webserver-allow-from=127.0.0.0/8",
                f"api-key={PDNS_API_KEY}",
                "threads=1",
                "quiet=yes",
                "setuid=",
                "setgid=",
            ]
        )
        + "\n"
    )
    argv = ["pdns_recursor", f"--config-dir={tmp}"]
    with serving(spawn("pdns-recursor", argv, tmp, port, web=web_port), "warm.example.") as server:
        yield server


# ---------------------------------------------------------------- pdns-server (auth)

PDNS_SCHEMA = Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")


def pdns_config(tmp: Path, db: Path, port: int, web_port: int, api_key: str) -> str:
    return (
        "\n".join(
            [
                "launch=gsqlite3",
                f"gsqlite3-database={db}",
                "local-address=127.0.0.1",
                f"local-port={port}",
                "api=yes",
                f"api-key={api_key}",
                "webserver=yes",
                "webserver-address=127.0.0.1",
                f"webserver-port={web_port}",
                "webserver-allow-from=127.0.0.0/8",
                "security-poll-suffix=",
                "daemon=no",
                "guardian=no",
                "disable-syslog=yes",
                f"socket-dir={tmp}",
                "loglevel=4",
                "setuid=",
                "setgid=",
                "distributor-threads=1",
                "receiver-threads=1",
            ]
        )
        + "\n"
    )


def create_pdns_db(db: Path, schema: Path = PDNS_SCHEMA) -> None:
    subprocess.run(["sqlite3", str(db)], input=schema.read_bytes(), check=True)


@contextlib.contextmanager
def pdns_server(tmp: Path, db: Path | None = None) -> Iterator[ServerProc]:
    """pdns-server 4.7 with gsqlite3 and its HTTP API; extra_ports['web'], api key PDNS_API_KEY."""
    port, web_port = free_port(), free_port()
    if db is None:
        db = tmp / "pdns.sqlite3"
        create_pdns_db(db)
    (tmp / "pdns.conf").write_text(pdns_config(tmp, db, port, web_port, PDNS_API_KEY))
    argv = ["pdns_server", f"--config-dir={tmp}"]
    with serving(
        spawn("pdns-server", argv, tmp, port, web=web_port), "example.test.", web_port
    ) as server:
        yield server
