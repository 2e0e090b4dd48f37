"""A throwaway certificate for DoT and DoH servers on loopback (openssl CLI)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SERVER_NAME = "dns.soak.test"


def make_cert(tmp: Path) -> tuple[Path, Path]:
    """A self-signed EC certificate for SERVER_NAME and 127.0.0.1, valid two days."""
    cert, key = tmp / "server.pem", tmp / "server.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", f"/CN={SERVER_NAME}",
            "-addext", f"subjectAltName=DNS:{SERVER_NAME},IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
