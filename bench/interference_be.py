"""BE work for ``bench/interference_calibration.py``, one kind per process, running until killed.

``python bench/interference_be.py KIND BYTES``:

* ``cpu``: ``while True: pass`` in pure Python (one core of integer work, no memory traffic; BYTES unused).
* ``membw``: memory-bandwidth streaming: ``np.copyto`` from one float64 array of BYTES to another, again and
  again (the benchmark passes 8 × the LLC size, so every copy misses the cache and streams through DRAM).
* ``cache``: cache thrashing: gathers (``np.take``) at random positions of an int64 array of BYTES (about the
  LLC size): 16 fixed blocks of 65,536 random indices (256 KiB each) reused in turn, so most reads are random
  cache lines of the big array and the LS pod's lines are evicted from the shared LLC.

NumPy's copy and gather are single-threaded: one process is one BE worker (about one core when it may run).
Raises SystemExit on an unknown kind.
"""

from __future__ import annotations

import sys

import numpy as np

KINDS = ("cpu", "membw", "cache")
_BLOCK = 65_536
_BLOCKS = 16


def spin() -> None:
    while True:
        pass


def stream(nbytes: int) -> None:
    src = np.ones(max(nbytes // 8, 1), dtype=np.float64)
    dst = np.zeros_like(src)  # zeros_like touches no pages; the first copy faults them in
    while True:
        np.copyto(dst, src)


def thrash(nbytes: int) -> None:
    data = np.arange(max(nbytes // 8, 1), dtype=np.int64)
    rng = np.random.default_rng(0)
    blocks = [rng.integers(0, data.size, _BLOCK).astype(np.int32) for _ in range(_BLOCKS)]
    out = np.empty(_BLOCK, dtype=np.int64)
    while True:
        for idx in blocks:
            np.take(data, idx, out=out)


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in KINDS or not argv[1].isdigit():
        raise SystemExit(f"usage: interference_be.py {{{'|'.join(KINDS)}}} BYTES (got {argv})")
    kind, nbytes = argv[0], int(argv[1])
    if kind == "cpu":
        spin()
    elif kind == "membw":
        stream(nbytes)
    else:
        thrash(nbytes)


if __name__ == "__main__":
    main(sys.argv[1:])
