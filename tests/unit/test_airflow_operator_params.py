"""The operators' shared params are declared once (``operators._base``), and the Spark
operators use only the Spark provider's public face."""

from __future__ import annotations

import inspect
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.hooks import CdcLakeHook, CdcMetadataHook, CdcSourceHook
from airflow_cdc.operators._base import (
    CdcBaseOperator,
    LakeOperator,
    LakeRowsOperator,
    SelectedTablesOperator,
)
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.operators.snapshot import SnapshotChunkOperator
from airflow_cdc.operators.stream import StreamOperator
from airflow_cdc.operators.upkeep import TableUpkeepOperator
from airflow_cdc.operators.verify import VerifyOperator
from airflow_cdc.operators.watchdog import StreamWatchdogOperator

OPERATORS = Path(__file__).resolve().parents[2] / "airflow_cdc" / "operators"

#: Each operator and the base that declares its shared params.
SHARED: dict[type, type] = {
    PlanSnapshotOperator: SelectedTablesOperator,
    StreamOperator: SelectedTablesOperator,
    VerifyOperator: SelectedTablesOperator,
    SnapshotChunkOperator: LakeRowsOperator,
    TableUpkeepOperator: LakeOperator,
    StreamWatchdogOperator: CdcBaseOperator,
}
SHARED_PARAMS = {
    CdcBaseOperator: {"source_conn_id", "metadata_conn_id", "lake_conn_id"},
    LakeOperator: {"sink_path", "staging_path", "routes", "routes_unique_keys"},
    LakeRowsOperator: {"columns", "masks", "mask_conn_id", "change_metadata"},
    SelectedTablesOperator: {"tables", "exclude_tables"},
}


def _declared(cls: type) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}  # type: ignore[misc]


@pytest.mark.parametrize("operator", list(SHARED), ids=lambda cls: cls.__name__)
def test_every_operator_takes_the_shared_params_from_its_base(operator: type) -> None:
    base = SHARED[operator]
    assert issubclass(operator, base)
    shared = set().union(*(names for cls, names in SHARED_PARAMS.items() if issubclass(base, cls)))
    # Declared once, by the bases: the operator's own __init__ declares none of its base's
    # (the upkeep's ``tables``, which narrows the stream's tables, is its own).
    assert not _declared(operator) & shared
    for cls, names in SHARED_PARAMS.items():
        assert _declared(cls) == names
        # Keyword-only, as Airflow's operators take them.
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
        assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params)
    assert set(base.template_fields) <= set(operator.template_fields)
    # Every shared param reaches the instance under its own name.
    kwargs: dict[str, Any] = {
        "task_id": "t",
        "source_conn_id": "src",
        "metadata_conn_id": "meta",
        "lake_conn_id": "lake",
        "sink_path": "/lake",
        "staging_path": "/staging",
        "routes": {"shop.orders_*": "shop.orders"},
        "routes_unique_keys": True,
        "tables": ["shop.orders"],
        "exclude_tables": ["shop.tmp"],
        "columns": {"shop.orders": {"exclude": ["note"]}},
        "masks": {"shop.orders.email": "hash"},
        "mask_conn_id": "mask",
        "change_metadata": True,
        "stream_id": "s",
        "chunk_rows": 10,
        "unit": {"chunk_ids": [1]},
    }
    op = operator(**{k: v for k, v in kwargs.items() if k in _accepted(operator)})
    for name in shared:
        assert getattr(op, name) == kwargs[name], name


def _accepted(operator: type) -> set[str]:
    names: set[str] = {"task_id"}
    for cls in operator.__mro__:
        if "__init__" in vars(cls):
            names |= _declared(cls)
    return names


def test_the_connection_ids_default_to_the_hooks_own() -> None:
    op = StreamWatchdogOperator(task_id="w", stream_id="s")
    assert op.source_conn_id == CdcSourceHook.default_conn_name
    assert op.metadata_conn_id == CdcMetadataHook.default_conn_name
    assert op.lake_conn_id == CdcLakeHook.default_conn_name
    # Written once: in the hooks, not in any operator.
    for path in OPERATORS.glob("*.py"):
        assert not re.search(r'"cdc_(source|metadata|lake)"', path.read_text()), path.name


def test_a_mapped_chunk_task_takes_the_shared_params_in_partial() -> None:
    """Airflow checks ``partial``'s names against each class's ``__init__``: the bases'
    count."""
    from airflow.sdk import DAG

    with DAG("d", schedule=None):
        mapped = SnapshotChunkOperator.partial(
            task_id="c", sink_path="/lake", staging_path="/st", lake_conn_id="lake"
        ).expand(unit=[{"chunk_ids": [1]}])
    assert mapped.partial_kwargs["sink_path"] == "/lake"
    assert mapped.partial_kwargs["lake_conn_id"] == "lake"


def test_the_spark_operators_read_no_private_attribute_of_the_provider() -> None:
    """``_hook``, ``_spark_binary``, ``_conn_id``, ``_get_hook`` and the hook's process are
    the provider's own, renamed at will by an upgrade."""
    private = re.compile(r"\b_(hook|spark_binary|conn_id|get_hook|submit_sp)\b")
    for path in OPERATORS.glob("*.py"):
        assert not private.search(path.read_text()), path.name


@pytest.fixture
def spark_connection(monkeypatch: pytest.MonkeyPatch) -> Any:
    def define(extra: str = "{}") -> None:
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_DEFAULT",
            f'{{"conn_type": "spark", "host": "local[1]", "extra": {extra}}}',
        )

    return define


def test_no_binary_named_runs_the_installed_pyspark(spark_connection: Any) -> None:
    from airflow_cdc.spark.environment import spark_submit_binary

    spark_connection()
    op = SnapshotChunkOperator(task_id="t", unit={"chunk_ids": [1]}, sink_path="/lake")
    env = op.submit_environment()
    assert shutil.which("spark-submit", path=env["PATH"]) == spark_submit_binary()
    assert op.spark_conn_id == "spark_default"


def test_a_named_binary_is_left_to_the_provider(spark_connection: Any) -> None:
    """``spark_binary`` goes to the provider's constructor; a connection naming one
    (extra ``spark-binary``) means the cluster's on PATH: neither changes PATH."""
    spark_connection()
    op = SnapshotChunkOperator(
        task_id="t", unit={"chunk_ids": [1]}, sink_path="/lake", spark_binary="/opt/x/submit"
    )
    assert op.spark_binary == "/opt/x/submit"
    assert "PATH" not in op.submit_environment()
    spark_connection('{"spark-binary": "spark3-submit"}')
    op = SnapshotChunkOperator(task_id="t", unit={"chunk_ids": [1]}, sink_path="/lake")
    assert "PATH" not in op.submit_environment()
