"""``colo submit``: one line per object, ``--dry-run`` shows each workload's pods, nothing published on error."""

from __future__ import annotations

from pathlib import Path

import pytest

from colo import subjects
from colo.cli import main as cli
from colo.cli import submit
from colo.manifests import Manifest
from colo.settings import RuntimeSettings
from colo.submission import Outcome, publications

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, object, object, object]]:
    out: list[tuple[object, object, object, object]] = []

    async def fake_submit(manifest: Manifest, url: str, attempts: int, wait_s: float | None,
                          settings: RuntimeSettings | None = None) -> list[Outcome]:
        assert settings is not None and settings.nats_url == url  # the link settings reach the connection
        out.extend(publications(manifest))
        return []

    monkeypatch.setattr(submit, "submit", fake_submit)
    monkeypatch.setenv("COLO_NATS_URL", "nats://127.0.0.1:1")
    return out


def test_one_line_per_object_on_its_subject(published: list[tuple[object, ...]], capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text((EXAMPLES / "podgroups.yaml").read_text() + "\n---\n" + (EXAMPLES / "job-queue.yaml").read_text())
    assert cli.main(["submit", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "podgroup/ps (min 2, Strict, timeout 1800s) submitted",
        "podgroup/worker (min 4, Strict, timeout 1800s) submitted",
        "statefulset/ps (2 pods) submitted",
        "statefulset/worker (4 pods) submitted",
        "job/etl (4 pods, 20 completions) submitted",
    ]
    assert [s for s, *_ in published] == [subjects.PODGROUP_SUBMITTED] * 2 + [subjects.WORKLOAD_SUBMITTED] * 3


def test_dry_run_shows_the_expansion_and_publishes_nothing(published: list[tuple[object, ...]],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["submit", "--dry-run", str(EXAMPLES / "job-gang.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "job/train (8 pods) valid"
    assert lines[1:] == [f"  pod/train-{i} (ml-train-{i}) gang ml/train (min 8)" for i in range(8)]
    assert published == []


def test_any_error_publishes_nothing(published: list[tuple[object, ...]], capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text((EXAMPLES / "quotas.yaml").read_text() + "\n---\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 0}")
    assert cli.main(["submit", str(path)]) == 1
    out = capsys.readouterr().out
    assert "[3].spec.parallelism: must be ≥ 1, got 0" in out and "[3].spec.template: required" in out
    assert "2 error(s); nothing submitted" in out
    assert published == []


def test_a_resubmission_whose_changes_were_not_applied_is_a_warning() -> None:
    from colo.cli.submit import outcome_line
    from colo.messages import WorkloadAdmitted
    from colo.submission import Outcome, apply_answer

    expected = {("workload", "ml-web"): Outcome("Deployment", "ml", "web", "ml-web")}
    msg = WorkloadAdmitted(kind="Deployment", uid="ml-web", name="web", namespace="ml", pods=["a", "b", "c"], at=1.0,
                           not_applied=["replicas: 3 → 5"])
    assert apply_answer(expected, msg, {})
    line = outcome_line(expected[("workload", "ml-web")], 5.0)
    assert line == ("deployment/web was admitted earlier (3 pods); this spec's changes were NOT applied: "
                    "replicas: 3 → 5 (the first admitted spec holds: submit it under a new name)")
