"""The test servers are real and leave nothing behind: SeaweedFS answers S3 calls with
signatures checked (a wrong secret is refused), a Spark standalone cluster runs Python tasks
in executor processes its workers launched (not in the driver, not in local mode), and
``stop()`` of either leaves no process of it running (its recorded pids, the executors and
PySpark's workers, anything whose command line or working folder is in its folder)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from airflow_cdc.spark.environment import JOB_JVM_CONF, spark_environment, spark_submit_binary
from devtools.local_seaweedfs import LocalSeaweedFS
from devtools.spark_cluster import LocalSparkCluster

pytestmark = pytest.mark.integration


def _running(pid: int) -> bool:
    """A process with this pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _processes_in(folder: Path) -> list[str]:
    """Running processes whose command line names ``folder`` or whose working folder is in it."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or not _running(int(entry.name)):
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if str(folder) in cmdline or Path(cwd).is_relative_to(folder):
            found.append(f"{entry.name} (cwd {cwd}): {cmdline[:300]}")
    return found


def _s3(server: LocalSeaweedFS, secret_key: str | None = None) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        access_key=server.access_key,
        secret_key=server.secret_key if secret_key is None else secret_key,
        endpoint_override=server.endpoint_url.removeprefix("http://"),
        scheme="http",
        region=server.region,
        connect_timeout=2,
        request_timeout=10,
    )


# -- SeaweedFS ----------------------------------------------------------------------------------


def test_seaweedfs_is_an_s3_server_that_checks_signatures(seaweedfs: LocalSeaweedFS) -> None:
    assert seaweedfs.endpoint_url.startswith("http://127.0.0.1:")
    s3 = _s3(seaweedfs)
    folder = f"lake/devtools-{uuid.uuid4().hex}"
    payload = os.urandom(100_000)  # more than one small write
    with s3.open_output_stream(f"{folder}/a.bin") as out:
        out.write(payload)
    listed = s3.get_file_info(pafs.FileSelector(folder, recursive=True))
    assert [(info.path, info.size) for info in listed] == [(f"{folder}/a.bin", len(payload))]
    with s3.open_input_stream(f"{folder}/a.bin") as source:
        assert source.read() == payload
    s3.delete_file(f"{folder}/a.bin")
    selector = pafs.FileSelector(folder, recursive=True, allow_not_found=True)
    assert s3.get_file_info(selector) == []

    with pytest.raises(OSError, match=r"(?i)access.?denied|signature|forbidden|403"):
        _s3(seaweedfs, secret_key=seaweedfs.secret_key[::-1]).get_file_info(
            pafs.FileSelector("lake", recursive=True)
        )

    # The keys are per instance and live only in a 0600 file, never on the command line.
    conn = seaweedfs.airflow_connection()
    assert conn == {
        "conn_type": "aws",
        "login": seaweedfs.access_key,
        "password": seaweedfs.secret_key,
        "extra": {"endpoint_url": seaweedfs.endpoint_url, "region_name": "us-east-1"},
    }
    assert seaweedfs.pid is not None
    cmdline = Path(f"/proc/{seaweedfs.pid}/cmdline").read_bytes()
    assert seaweedfs.secret_key.encode() not in cmdline
    identities = seaweedfs.base_dir / "identities.json"
    assert stat.S_IMODE(identities.stat().st_mode) == 0o600
    assert LocalSeaweedFS(Path("unused")).secret_key != seaweedfs.secret_key


def test_seaweedfs_stop_leaves_no_process(tmp_path: Path) -> None:
    base = tmp_path / "seaweedfs"
    began = time.monotonic()
    with LocalSeaweedFS(base) as server:
        started = time.monotonic() - began
        pid = server.pid
        assert pid is not None
        assert _running(pid)
        assert _processes_in(base), "the server should be found by its folder"
        server.create_bucket("scratch")
        with _s3(server).open_output_stream("scratch/x") as out:
            out.write(b"x")
        stopping = time.monotonic()
    stopped = time.monotonic() - stopping
    print(f"SeaweedFS: started in {started:.1f} s, stopped in {stopped:.1f} s")
    assert not _running(pid)
    assert _processes_in(base) == []
    assert server.pid is None
    for name in ("master", "volume", "filer", "s3"):  # its gRPC sockets in /tmp
        assert not Path(f"/tmp/seaweedfs-{name}-grpc-{server.ports[name] + 10_000}.sock").exists()
    assert stopped < 10  # SIGTERM alone takes more than 15 s
    server.stop()  # again: nothing to do


# -- Spark standalone cluster -------------------------------------------------------------------

WHERE_JOB = '''
"""Runs Python on the executors; reports which executor JVM (and Python worker) ran each task."""
import json, os, socket, sys, time
from pyspark.sql import SparkSession


def executor_of(_):
    time.sleep(0.2)
    pid = os.getpid()
    while pid > 1:  # a Python worker, its pyspark.daemon, the executor JVM
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\\0")
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
            executor_id = args[args.index("--executor-id") + 1]
            return socket.gethostname(), executor_id, pid, os.getpid(), os.getcwd()
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return socket.gethostname(), None, None, os.getpid(), os.getcwd()


out, release = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("where-do-tasks-run").getOrCreate()
sc = spark.sparkContext
deadline = time.monotonic() + 60  # both executors up (the driver's block manager counts too)
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
    time.sleep(0.1)
tasks = sc.parallelize(range(8), 8).map(executor_of).collect()
result = {"master": sc.master, "app_id": sc.applicationId, "driver_pid": os.getpid(),
          "tasks": tasks}
print("TASKS RAN IN", json.dumps(result), flush=True)
with open(out + ".tmp", "w") as f:
    json.dump(result, f)
os.rename(out + ".tmp", out)
deadline = time.monotonic() + 120  # keep the executors until the test has looked at them
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.2)
spark.stop()
'''


def _submit(cluster: LocalSparkCluster, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp_path / "where_job.py"
    script.write_text(WHERE_JOB)
    out = tmp_path / "result.json"
    env = {
        **os.environ,
        **spark_environment(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp_path / "driver-local"),
    }
    conf = {
        **JOB_JVM_CONF,
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.executor.memory": "512m",
        "spark.ui.enabled": "false",
    }
    command = [spark_submit_binary(), "--master", cluster.master_url, "--driver-memory", "512m"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [str(script), str(out), str(tmp_path / "release")]
    with open(tmp_path / "driver.log", "wb") as log:
        job = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return job, out


def _end(job: subprocess.Popen[bytes]) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def test_spark_cluster_runs_python_in_executors_and_stop_kills_them(tmp_path: Path) -> None:
    base = tmp_path / "cluster"
    began = time.monotonic()
    cluster = LocalSparkCluster(base, workers=2, cores=1, memory="1g")
    cluster.start()
    started = time.monotonic() - began
    job: subprocess.Popen[bytes] | None = None
    try:
        daemons = cluster.pids
        assert len(daemons) == 3  # master, two workers
        assert all(_running(pid) for pid in daemons)
        assert cluster.alive_workers() == 2
        job, out = _submit(cluster, tmp_path)
        deadline = time.monotonic() + 120
        while not out.exists():
            if job.poll() is not None or time.monotonic() > deadline:
                log = (tmp_path / "driver.log").read_text(errors="replace")
                pytest.fail(f"the job ended ({job.returncode}) without a result:\n{log[-4000:]}")
            time.sleep(0.2)
        result = json.loads(out.read_text())
        print("tasks ran in (host, executor id, executor pid, python pid, cwd):")
        for task in result["tasks"]:
            print("   ", task)

        assert result["master"] == cluster.master_url
        assert any(app["id"] == result["app_id"] for app in cluster.status()["activeapps"])
        executors = {(executor_id, jvm) for _, executor_id, jvm, _, _ in result["tasks"]}
        assert None not in {executor_id for executor_id, _ in executors}, result["tasks"]
        assert len(executors) == 2, "both executors ran tasks"
        assert len({executor_id for executor_id, _ in executors}) == 2
        worker_groups = set(daemons[1:])
        for _, executor_id, jvm, python_pid, cwd in result["tasks"]:
            # Not the driver's Python, but a worker of an executor JVM that a Spark worker
            # launched (in the worker's process group and in the worker's folder).
            assert python_pid != result["driver_pid"]
            assert os.getpgid(jvm) in worker_groups
            assert any(
                Path(cwd) == cluster.worker_dir(i) / result["app_id"] / executor_id
                for i in range(2)
            ), cwd
        recorded = set(daemons)
        recorded |= {jvm for _, _, jvm, _, _ in result["tasks"]}
        recorded |= {python_pid for *_, python_pid, _ in result["tasks"]}
        assert all(_running(pid) for pid in recorded)

        # Stopped while the application still holds its executors.
        stopping = time.monotonic()
        cluster.stop()
        stopped = time.monotonic() - stopping
        print(f"Spark cluster: started in {started:.1f} s, stopped in {stopped:.1f} s")
        assert [pid for pid in recorded if _running(pid)] == []
        assert _processes_in(base) == []
        assert cluster.pids == []
        assert job.poll() is None, "the driver is not the cluster's: stop() leaves it alone"
    finally:
        cluster.stop()
        if job is not None:
            _end(job)
