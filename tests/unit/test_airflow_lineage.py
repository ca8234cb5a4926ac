"""The operators' OpenLineage facets (``operators._lineage``): what each notes while it runs
becomes the provider's ``OperatorLineage``, with schema facets where a schema is known, and
no secret; and nothing imports OpenLineage when it is not installed.

The chunk and stream operators run as far as their job file (``prepare_submit``: no Spark);
the metadata DB is a real SQLite file. The whole run with the provider's file transport is
``tests/integration/test_airflow_e2e.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_cdc.config import SinkConfig, SourceConfig, VerifySettings
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TablePlan, TableSchema
from airflow_cdc.operators.snapshot import SnapshotChunkOperator
from airflow_cdc.operators.stream import StreamOperator
from airflow_cdc.operators.verify import VerifyOperator

PASSWORD = "Lineage-Secret-1"
ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "items")
ORDERS_SCHEMA = TableSchema(
    ORDERS,
    (Column("id", "int", "int(11)", False), Column("note", "varchar", "varchar(20)", True)),
    ("id",),
)


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The source, the metadata DB (SQLite, migrated, with a plan of both tables and the
    orders table's schema recorded) and Spark; the metadata URL."""
    url = f"sqlite:///{tmp_path}/meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", f"mysql://cdc:{PASSWORD}@db.example:3307/")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", url)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with MetadataStore.connect(url) as store:
        store.plans.create(
            "test",
            [
                TablePlan(t, ("id",), (ChunkRange(None, None),), 10, "single")
                for t in (ORDERS, ITEMS)
            ],
        )
        store.schema_history.record(BinlogPosition("mysql-bin.000001", 4), ORDERS_SCHEMA)
    return url


def _names(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def _schema(dataset: Any) -> list[tuple[str, str]]:
    schema = dataset.facets.get("schema")
    return [] if schema is None else [(f.name, f.type) for f in schema.fields]


def test_a_chunk_reports_its_units_tables_with_their_recorded_schemas(
    connections: str, tmp_path: Path
) -> None:
    with MetadataStore.connect(connections) as store:
        chunk_ids = [c.chunk_id for c in store.plans.get(1).chunks]
    unit = {"plan_id": 1, "chunk_ids": chunk_ids, "label": "shop: 2 tables"}
    op = SnapshotChunkOperator(task_id="chunk", unit=unit, sink_path=str(tmp_path / "lake"))
    assert _names(op.get_openlineage_facets_on_complete(None).inputs) == []  # ran nothing
    op.prepare_submit()
    op._cleanup()

    lineage = op.get_openlineage_facets_on_complete(None)
    source = "mysql://db.example:3307"
    assert _names(lineage.inputs) == [(source, "shop.orders"), (source, "shop.items")]
    lake = tmp_path / "lake" / "shop"
    assert _names(lineage.outputs) == [("file", f"{lake}/orders"), ("file", f"{lake}/items")]
    assert _schema(lineage.inputs[0]) == [("id", "int(11)"), ("note", "varchar(20)")]
    assert _schema(lineage.outputs[0]) == [("id", "int32"), ("note", "string")]
    assert _schema(lineage.inputs[1]) == []  # nothing recorded yet: named only
    assert PASSWORD not in repr(lineage)


def test_a_stream_reports_its_tables(connections: str, tmp_path: Path) -> None:
    op = StreamOperator(
        task_id="stream",
        tables=["shop.orders", "shop.items"],
        sink_path=str(tmp_path / "lake"),
        stream_id="s1",
    )
    op.prepare_submit()
    op._cleanup()
    lineage = op.get_openlineage_facets_on_complete(None)
    assert [d.name for d in lineage.inputs] == ["shop.orders", "shop.items"]
    assert [d.name.rsplit("/", 2)[1:] for d in lineage.outputs] == [
        ["shop", "orders"],
        ["shop", "items"],
    ]
    assert _schema(lineage.outputs[0]) == [("id", "int32"), ("note", "string")]
    assert PASSWORD not in repr(lineage)


def test_routed_tables_report_their_route_s_delta_table(connections: str, tmp_path: Path) -> None:
    op = StreamOperator(
        task_id="stream",
        tables=["shop.orders_00", "shop.orders_01", "shop.items"],
        sink_path=str(tmp_path / "lake"),
        routes={"shop.orders_*": "shop.orders"},
        stream_id="s1",
    )
    op.prepare_submit()
    op._cleanup()
    lineage = op.get_openlineage_facets_on_complete(None)
    assert [d.name for d in lineage.inputs] == ["shop.orders_00", "shop.orders_01", "shop.items"]
    assert [d.name.rsplit("/", 2)[1:] for d in lineage.outputs] == [
        ["shop", "orders"],
        ["shop", "items"],
    ]


@pytest.mark.parametrize("columns", [None, {"shop.orders": {"exclude": ["note"]}}])
def test_verify_reports_the_schemas_it_read(
    monkeypatch: pytest.MonkeyPatch, columns: dict[str, Any] | None
) -> None:
    from airflow_cdc.planning import plan_snapshot
    from airflow_cdc.source import catalog, connection, server
    from airflow_cdc.verify import run

    monkeypatch.setattr(connection, "connect", lambda cfg: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(server, "server_info", lambda conn, epoch: "MariaDB")
    monkeypatch.setattr(catalog, "resolve_selection", lambda conn, selection: [ORDERS])
    monkeypatch.setattr(catalog, "load_table_schemas", lambda conn, tables: [ORDERS_SCHEMA])
    monkeypatch.setattr(plan_snapshot, "chunked_schemas", lambda conn, schemas: schemas)
    monkeypatch.setattr(run, "verify_tables", lambda *args, **kwargs: [])
    op = VerifyOperator(
        task_id="verify", tables=["shop.orders"], sink_path="s3://bucket/lake", columns=columns
    )
    store = SimpleNamespace(servers=SimpleNamespace(current=lambda cfg, may_switch: None))
    source = SourceConfig(host="db.example", port=3306, password=PASSWORD)
    sink = SinkConfig(root="s3://bucket/lake", storage_options={"AWS_SECRET_ACCESS_KEY": "k"})
    op._verify(store, source, sink, op.selection(), VerifySettings(), False)  # type: ignore[arg-type]

    lineage = op.get_openlineage_facets_on_complete(None)
    assert _names(lineage.inputs) == [("mysql://db.example:3306", "shop.orders")]
    assert _names(lineage.outputs) == [("s3://bucket", "lake/shop/orders")]
    assert _schema(lineage.inputs[0]) == [("id", "int(11)"), ("note", "varchar(20)")]
    # the Delta table's columns: those 'columns' leaves out are not there
    stored = [("id", "int32")] + ([("note", "string")] if columns is None else [])
    assert _schema(lineage.outputs[0]) == stored
    assert PASSWORD not in repr(lineage)
    assert "AWS_SECRET" not in repr(lineage)


def test_only_the_facets_method_imports_openlineage() -> None:
    """No module of the package imports OpenLineage at its top level (nor under
    TYPE_CHECKING only would count as one): only functions of ``operators/_lineage.py`` do,
    so without the provider the package imports, and the methods are never called."""
    package = Path(__file__).resolve().parents[2] / "airflow_cdc"
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        in_functions = {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef)
            for node in ast.walk(function)
        }
        for node in ast.walk(tree):
            module = _imported_module(node)
            if module is None or not _is_openlineage(module):
                continue
            where = f"{path.relative_to(package)}:{node.lineno}"
            if path.name != "_lineage.py" or (
                id(node) not in in_functions and not _under_type_checking(tree, node)
            ):
                found.append(where)
    assert found == []


def test_the_operators_and_dags_import_no_openlineage(tmp_path: Path) -> None:
    """The shipped DAGs load, and no OpenLineage module is first imported from the
    package's code or a DAG file. Weaker than the source check above: the Spark provider
    imports the installed OpenLineage provider first, so a second import of a module it
    loaded is not seen here."""
    script = textwrap.dedent(
        """
        import importlib.abc, runpy, sys, traceback

        class Watch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "openlineage" or name.startswith(
                    "airflow.providers.openlineage"
                ):
                    # The module whose import statement this is: the innermost real file.
                    frames = [
                        f for f in traceback.extract_stack()[:-1]
                        if not f.filename.startswith("<")
                    ]
                    importer = frames[-1].filename if frames else ""
                    if "/airflow_cdc/" in importer or "/dags/" in importer:
                        sys.stderr.write(f"imported {name} from {importer}\\n")
                return None

        sys.meta_path.insert(0, Watch())
        for dag in ("mysql_cdc", "mysql_cdc_backfill", "mysql_cdc_verify"):
            runpy.run_path(f"dags/{dag}.py")
        from airflow_cdc.operators.verify import VerifyOperator
        op = VerifyOperator(task_id="v", tables=["a.b"], sink_path="/lake")
        assert op.task_lineage().inputs == ()
        print("ok")
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
    assert "imported " not in done.stderr, done.stderr[-3000:]


def _imported_module(node: ast.AST) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.module:
        return node.module
    if isinstance(node, ast.Import):
        return node.names[0].name
    return None


def _is_openlineage(module: str) -> bool:
    return (
        module.split(".")[0] == "openlineage"
        or module.startswith("airflow.providers.openlineage")
        or module.startswith("airflow.providers.common.compat.openlineage")
    )


def _under_type_checking(tree: ast.Module, node: ast.AST) -> bool:
    return any(
        isinstance(block, ast.If)
        and isinstance(block.test, ast.Name)
        and block.test.id == "TYPE_CHECKING"
        and any(inner is node for inner in ast.walk(block))
        for block in tree.body
    )
