"""The committed AsyncAPI document and subject table match the subject registry."""

from pathlib import Path

import pytest

from colo import asyncapi, subjects

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(asyncapi.render()))
def test_generated_docs_are_current(name: str) -> None:
    committed = (DOCS / name).read_text()
    assert committed == asyncapi.render()[name], f"docs/{name} is stale: run python -m colo.asyncapi"


def test_every_subject_has_a_channel_and_schema() -> None:
    doc = asyncapi.document()
    addresses = {c["address"] for c in doc["channels"].values()}
    assert addresses == {s.pattern for s in subjects.ALL}
    for s in subjects.ALL:
        assert s.type.__name__ in doc["components"]["schemas"]


def test_help_prints_usage_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        asyncapi.main(["--help"])
    assert exit_info.value.code == 0
    assert "usage: python -m colo.asyncapi" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
