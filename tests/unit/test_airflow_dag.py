"""dags/mysql_cdc.py parses under Airflow and has the expected shape.

Airflow reads its configuration when first imported, so the DagBag is filled in a fresh
interpreter with its own AIRFLOW_HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

_PROBE = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags.get("mysql_cdc")
out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dag_ids": sorted(bag.dags)}
if dag is not None:
    out["schedule"] = type(dag.timetable).__name__
    out["catchup"] = dag.catchup
    out["params"] = {k: dag.params.get_param(k).resolve() for k in dag.params}
    out["param_schemas"] = {k: dag.params.get_param(k).schema for k in dag.params}
    out["tasks"] = {
        t.task_id: {
            "type": type(t).__name__,
            "operator": t.operator_name if hasattr(t, "operator_name") else type(t).__name__,
            "upstream": sorted(t.upstream_task_ids),
            "downstream": sorted(t.downstream_task_ids),
            "trigger_rule": str(t.trigger_rule.value if hasattr(t.trigger_rule, "value") else t.trigger_rule),
            "map_index_template": getattr(t, "map_index_template", None),
            "mode": getattr(t, "mode", None),
        }
        for t in dag.tasks
    }
    snap = dag.get_task("snapshot_chunk")
    out["max_active_tis_per_dagrun"] = snap.partial_kwargs.get("max_active_tis_per_dagrun")
    out["chunk_retries"] = snap.partial_kwargs.get("retries")
    out["expand_input"] = sorted(snap.expand_input.value)
    stream = dag.get_task("stream")
    out["stream_fields"] = {
        k: getattr(stream, k)
        for k in ("tables", "sink_path", "stream_mode", "stream_id", "checkpoint_dir")
    }
print("JSON:" + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def dag_info(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(REPO / "dags")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("JSON:"))
    info: dict[str, Any] = json.loads(line[5:])
    return info


def test_dag_imports_without_errors(dag_info: dict[str, Any]) -> None:
    assert dag_info["errors"] == {}
    assert "mysql_cdc" in dag_info["dag_ids"]
    assert dag_info["catchup"] is False
    assert dag_info["schedule"] == "NullTimetable"


def test_task_graph(dag_info: dict[str, Any]) -> None:
    tasks = dag_info["tasks"]
    assert set(tasks) == {"plan", "snapshot_chunk", "wait_for_chunks", "stream", "publish_snapshot"}
    assert tasks["plan"]["type"] == "PlanSnapshotOperator"
    assert tasks["plan"]["downstream"] == ["publish_snapshot", "snapshot_chunk", "wait_for_chunks"]
    assert tasks["snapshot_chunk"]["type"] == "MappedOperator"
    assert tasks["snapshot_chunk"]["operator"] == "SnapshotChunkOperator"
    assert tasks["snapshot_chunk"]["upstream"] == ["plan"]
    assert tasks["snapshot_chunk"]["map_index_template"] == "{{ task.unit['label'] }}"
    assert dag_info["expand_input"] == ["unit"]
    assert dag_info["max_active_tis_per_dagrun"] == 2
    wait = tasks["wait_for_chunks"]
    assert wait["type"] == "ChunksCompleteSensor"
    assert wait["upstream"] == ["plan", "snapshot_chunk"]
    assert wait["mode"] == "reschedule"
    assert wait["trigger_rule"] == "all_done_min_one_success"
    assert wait["downstream"] == ["publish_snapshot", "stream"]
    # The Asset events (one per table) beside the stream, not holding it up.
    publish = tasks["publish_snapshot"]
    assert publish["type"] == "ChunksCompleteSensor"
    assert publish["upstream"] == ["plan", "wait_for_chunks"]
    assert publish["trigger_rule"] == "all_success"
    assert publish["downstream"] == []
    stream = tasks["stream"]
    assert stream["type"] == "StreamOperator"
    assert stream["upstream"] == ["wait_for_chunks"]
    assert stream["downstream"] == []
    assert stream["trigger_rule"] == "all_success"
    assert dag_info["stream_fields"] == {
        "tables": "{{ params.tables }}",
        "sink_path": "{{ params.sink_path }}",
        "stream_mode": "{{ params.stream_mode }}",
        "stream_id": "mysql_cdc",
        "checkpoint_dir": None,
    }


def test_chunk_tasks_retry_by_default(dag_info: dict[str, Any]) -> None:
    from airflow_cdc.configured import DEFAULT_CHUNK_RETRIES

    assert dag_info["chunk_retries"] == DEFAULT_CHUNK_RETRIES > 0


def test_params(dag_info: dict[str, Any]) -> None:
    from airflow_cdc.config import DEFAULT_CHUNK_ROWS

    params = dag_info["params"]
    assert params["tables"] == ["demo.orders", "demo.customers"]
    assert params["sink_path"] == "/tmp/airflow-cdc/lake"
    assert params["chunk_rows"] == DEFAULT_CHUNK_ROWS
    assert params["chunk_keys"] == {}
    assert params["stream_mode"] == "continuous"
    schemas = dag_info["param_schemas"]
    assert schemas["tables"]["type"] == "array"
    assert schemas["chunk_rows"]["minimum"] == 1
    assert schemas["stream_mode"]["enum"] == ["continuous", "until_caught_up"]
    assert params["startup_mode"] == "initial"
    assert params["start_position"] == params["start_timestamp"] == ""
    assert schemas["startup_mode"]["enum"] == [
        "initial",
        "snapshot_only",
        "latest",
        "position",
        "timestamp",
    ]
