"""Issue 14, observation 3: the CLI reads like kubectl. Status ``Rejected``/``Deleted``, resource columns labelled
by kind (a BE pod's cores say batch-cpu), a cordon column, human times in ``colo events``, pods named by
``NAME -n NS``, ``NS/NAME`` or uid, and ``colo submit``'s exit code and message when admission refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from colo.cli import main as cli
from colo.cli import submit
from colo.cli.events import format_time
from colo.cli.get import nodes_table, pod_reason, pod_status, pods_table, requests_cell
from colo.manifests import Manifest
from colo.messages import NodeResource, NodeSpec, PodRecord, PodSpec, Resources
from colo.podref import RefError, select_pods
from colo.submission import Outcome

GI = 2**30


def _rows(table: object) -> list[list[str]]:
    console = Console(width=400, record=True)
    console.print(table)
    lines = [line.replace("┃", "│") for line in console.export_text().splitlines()]
    return [[c.strip() for c in line.split("│")[1:-1]] for line in lines if "│" in line]


def _rec(uid: str, name: str, ns: str = "default", phase: str = "Pending", reason: str = "", node: str = "",
         **spec: object) -> PodRecord:
    return PodRecord(spec=PodSpec(uid=uid, name=name, namespace=ns, **spec), phase=phase,  # type: ignore[arg-type]
                     reason=reason, node=node)


@pytest.mark.parametrize(("record", "status", "reason"), [
    pytest.param(_rec("a", "a", phase="Failed", reason="Rejected: priority 9500 is outside the batch range"),
                 "Rejected", "priority 9500 is outside the batch range", id="rejected"),
    pytest.param(_rec("a", "a", phase="Failed", reason="Deleted: colo delete"), "Deleted", "colo delete",
                 id="deleted"),
    pytest.param(_rec("a", "a", phase="Failed", reason="Deleted", node="n1"), "Deleted", "-",
                 id="deleted-while-bound"),  # used to show Failed (Deleted)
    pytest.param(_rec("a", "a", phase="Failed", reason="Evicted"), "Failed", "Evicted", id="evicted"),
    pytest.param(_rec("a", "a", phase="Running", node="n1"), "Running", "-", id="running"),
])
def test_status_and_reason(record: PodRecord, status: str, reason: str) -> None:
    assert (pod_status(record), pod_reason(record, {})) == (status, reason)


@pytest.mark.parametrize(("requests", "cell"), [
    pytest.param(Resources(cpu=500, memory=GI), "cpu=500m mem=1Gi", id="ls"),
    pytest.param(Resources(batch_cpu=2000, batch_memory=4 * GI), "batch-cpu=2 batch-mem=4Gi", id="be"),
    pytest.param(Resources(mid_cpu=1500), "mid-cpu=1500m", id="mid"),
    pytest.param(Resources(), "-", id="none"),
])
def test_requests_labelled_by_kind(requests: Resources, cell: str) -> None:
    assert requests_cell(requests) == cell


def test_pods_table_columns() -> None:
    be = _rec("spark", "spark", labels={"koordinator.sh/qosClass": "BE"}, priority=5500,
              requests=Resources(batch_cpu=2000, batch_memory=4 * GI))
    rejected = _rec("web", "web", "shop", phase="Failed", reason="Rejected: bad")
    header, *rows = _rows(pods_table([be, rejected], {}))
    assert header == ["namespace", "name", "uid", "status", "node", "qos", "requests", "reason"]
    assert rows == [["default", "spark", "spark", "Pending", "-", "BE", "batch-cpu=2 batch-mem=4Gi", "-"],
                    ["shop", "web", "web", "Rejected", "-", "BE", "-", "bad"]]
    wide_header, *_ = _rows(pods_table([be], {}, wide=True))
    assert wide_header[-5:] == ["priority", "owner", "age", "limits", "reason"]


def test_nodes_table_has_a_cordon_column() -> None:
    r = Resources(cpu=8000, memory=16 * GI, pods=110)
    nodes = [NodeSpec(name="n1", capacity=r, allocatable=r), NodeSpec(name="n2", capacity=r, allocatable=r,
                                                                        unschedulable=True)]
    header, *rows = _rows(nodes_table(nodes, {"n1": NodeResource(node="n1", batch_cpu=3000)}, {}))
    assert header[:2] == ["name", "cordoned"]
    assert [row[:2] for row in rows] == [["n1", "no"], ["n2", "yes"]]
    assert rows[0][header.index("batch-cpu offered")] == "3"


@pytest.mark.parametrize(("at", "now", "style", "text"), [
    pytest.param(1_764_640_060.0, 1_764_640_072.0, "ago", "12s ago", id="seconds"),
    pytest.param(1_764_640_000.0, 1_764_640_184.0, "ago", "3m4s ago", id="minutes"),
    pytest.param(1_764_640_000.0, 1_764_647_500.0, "ago", "2h5m ago", id="hours"),
    pytest.param(1_764_640_010.0, 1_764_640_000.0, "ago", "in 10s", id="future"),
    pytest.param(1_764_640_000.0, 0.0, "iso", "2025-12-02T01:46:40Z", id="iso"),
    pytest.param(123.45, 0.0, "iso", "t=123.5s", id="simulated-clock"),
])
def test_human_times(at: float, now: float, style: str, text: str) -> None:
    assert format_time(at, now, style) == text


def test_events_show_no_raw_epochs() -> None:
    line = cli.describe("colo.v1.pod.rejected", b'{"uid":"u","name":"n","reason":"bad","at":1764640000}', "iso")
    assert line.startswith("2025-12-02T01:46:40Z pod.rejected") and "1764640000" not in line
    fallback = cli.describe("colo.v1.workload.rejected", b'{"kind":"Job","uid":"u","name":"n","namespace":"d",'
                            b'"errors":[],"at":1764640000}', "")
    assert "at=2025-12-02T01:46:40Z" in fallback


PODS = [_rec("shop-web-0", "web-0", "shop"), _rec("x1", "db", "shop"), _rec("x2", "db", "ml"),
        _rec("default-api", "api")]


@pytest.mark.parametrize(("ref", "namespace", "uid"), [
    pytest.param("web-0", "", "shop-web-0", id="bare-name-unique"),
    pytest.param("web-0", "shop", "shop-web-0", id="name-and-namespace"),
    pytest.param("shop/web-0", "", "shop-web-0", id="ns-slash-name"),
    pytest.param("x2", "", "x2", id="uid"),
    pytest.param("db", "ml", "x2", id="ambiguous-name-with-namespace"),
])
def test_pod_refs(ref: str, namespace: str, uid: str) -> None:
    assert [r.spec.uid for r in select_pods(PODS, ref, namespace)] == [uid]


@pytest.mark.parametrize(("ref", "namespace", "message"), [
    pytest.param("db", "", r"several namespaces \(ml, shop\)", id="ambiguous"),
    pytest.param("web-0", "ml", "no pod 'web-0' in namespace 'ml'", id="wrong-namespace"),
    pytest.param("nope", "", "no pod 'nope'", id="unknown"),
    pytest.param("web-0", "ml", "a pod of that name is in namespace shop: -n shop", id="wrong-namespace-hint"),
    pytest.param("db", "default", "a pod of that name is in namespaces ml, shop: -n ml", id="hint-several"),
    pytest.param("ml/web-0", "", "is in namespace shop: -n shop", id="wrong-namespace-slash-hint"),
])
def test_pod_ref_errors(ref: str, namespace: str, message: str) -> None:
    with pytest.raises(RefError, match=message):
        select_pods(PODS, ref, namespace)


def test_namespace_filter_and_all() -> None:
    assert {r.spec.uid for r in select_pods(PODS, "", "shop")} == {"shop-web-0", "x1"}
    assert len(select_pods(PODS)) == 4


@pytest.mark.parametrize(("outcomes", "code", "printed"), [
    pytest.param([Outcome("Pod", "shop", "web", "shop-web", "rejected", "priority 9500 is outside the batch range")],
                 1, "pod/web rejected: priority 9500 is outside the batch range", id="rejected"),
    pytest.param([Outcome("Pod", "shop", "web", "shop-web", "admitted")], 0, "pod/web admitted", id="admitted"),
    pytest.param([Outcome("Pod", "shop", "web", "shop-web")], 3, "pod/web: no admission answer within 5 s",
                 id="no-answer"),
])
def test_submit_exit_code_follows_admission(outcomes: list[Outcome], code: int, printed: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    waits: list[float | None] = []

    async def fake_submit(manifest: Manifest, url: str, attempts: int, wait_s: float | None,
                          settings: object = None) -> list[Outcome]:
        waits.append(wait_s)
        return outcomes

    monkeypatch.setattr(submit, "submit", fake_submit)
    monkeypatch.setenv("COLO_NATS_URL", "nats://127.0.0.1:1")
    path = tmp_path / "pod.yaml"
    path.write_text("metadata: {name: web, namespace: shop}\nspec: {containers: [{resources: {requests: "
                    "{cpu: '1'}}}]}\n")
    assert cli.main(["submit", str(path)]) == code
    assert printed in capsys.readouterr().out
    assert cli.main(["submit", str(path), "--no-wait"]) == code
    assert waits == [5.0, None]
