"""Print the per-subject counts of a fuzz run as a table: ``python tests/fuzz/report.py [FILE]``.

``FILE`` is the JSON-lines report the fuzz tests append to (default ``out/fuzz/fuzz.jsonl``); the last line
per subject counts. Columns: payloads sent, how many the decoder refuses, the dead letters and the accepted
(decodable, not refused) messages summed over the subject's consumers, crashes (must be 0) and seconds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str = "out/fuzz/fuzz.jsonl") -> int:
    rows: dict[str, dict[str, object]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["subject"]] = row
    header = f"{'subject':34} {'sent':>7} {'undecodable':>11} {'consumers':>9} {'dead-lettered':>13} " \
             f"{'accepted':>9} {'crashes':>7} {'s':>6}"
    print(header)
    print("-" * len(header))
    total = {"sent": 0, "undecodable": 0, "dead": 0, "accepted": 0, "crashes": 0}
    for subject in sorted(rows):
        r = rows[subject]
        dead = sum(r["dead_lettered"].values())  # type: ignore[attr-defined]
        accepted = sum(r["accepted"].values())  # type: ignore[attr-defined]
        print(f"{subject.removeprefix('colo.v1.'):34} {r['sent']:>7} {r['undecodable']:>11} "
              f"{len(r['dead_lettered']):>9} {dead:>13} {accepted:>9} {r['crashes']:>7} {r['seconds']:>6}")  # type: ignore[arg-type]
        total["sent"] += int(r["sent"])  # type: ignore[call-overload]
        total["undecodable"] += int(r["undecodable"])  # type: ignore[call-overload]
        total["dead"] += dead
        total["accepted"] += accepted
        total["crashes"] += int(r["crashes"])  # type: ignore[call-overload]
    print("-" * len(header))
    print(f"{'total':34} {total['sent']:>7} {total['undecodable']:>11} {'':>9} {total['dead']:>13} "
          f"{total['accepted']:>9} {total['crashes']:>7}")
    return 1 if total["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
