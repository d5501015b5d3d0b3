"""Turn ``measure_kernels.py``'s GEMM measurements into a GEMM table (CSV) for a GPU preset.

    python scripts/gemm_csv.py measured.json astra_core/config/measured/h200_gemm.csv

Single products only (a batched shape is timed as that many products: see
:mod:`astra_core.workload.generators.gemm_table`). BF16 rows are written for any
pass (their three layouts run within 1 % of each other on an H200); FP8 rows for the
forward pass (fast accumulation) and the data-gradient pass, which stands for both
gradient passes (the same layout and split accumulation in Transformer Engine). A
shape measured more than once takes the geometric mean of its times.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections import defaultdict


def rows(measured: dict) -> list[tuple]:
    times = defaultdict(list)
    for row in measured["gemm"]:
        if "us" not in row or row["shape"][0] != 1:
            continue
        _, m, n, k = row["shape"]
        precision = row["precision"]
        pass_ = "" if precision == "bf16" else ("fprop" if row["pass"] == "fprop" else "dgrad")
        times[(int(m), int(n), int(k), precision, pass_)].append(row["us"])
    return [
        (1, *key[:3], key[3], key[4], round(math.exp(sum(map(math.log, us)) / len(us)), 3))
        for key, us in sorted(times.items(), key=lambda item: (item[0][3], item[0][4], item[0][:3]))
    ]


def main(argv: list[str]) -> int:
    source, target = argv
    with open(source) as f:
        measured = json.load(f)
    with open(target, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["batch", "m", "n", "k", "precision", "pass", "time_us"])
        out.writerows(rows(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
