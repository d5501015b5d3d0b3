"""Wall time and peak memory of generating and simulating Megatron-LM Table 1 rows.

Each row (validation/megatron.py: the SC'21 run settings on DGX A100 nodes with
the NCCL model) runs in a fresh subprocess, so its peak RSS is its own: the
generator writes one trace per GPU, astra reads them all, finds the rank
classes (one per pipeline stage) and simulates the representatives. The
target is 10 minutes and 4 GB per row on a 2-core machine.

    python benchmarks/megatron_table1.py [--rows 1-10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))  # validation/megatron.py is a script, not a package
from common import in_child, measure, parse_args  # noqa: E402


def run_row(number: str, folder: str) -> None:
    """Child process: generate and simulate one row, print one JSON line."""
    from megatron import ROWS, predict

    row = ROWS[int(number) - 1]
    holder = {}

    class _Result:  # what measure() reads of a RunResult
        step_ns = 0
        messages = 0
        network = None

    def run():
        holder["seconds"], holder["tflops"] = predict(row, Path(folder))
        out = _Result()
        out.step_ns = int(holder["seconds"] * 1e9)
        return out

    m = measure(run)
    m.update(tflops=holder["tflops"], gpus=row.gpus, name=row.name)
    print(json.dumps(m))


def main() -> None:
    from megatron import ROWS, parse_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1-10", help="rows of Table 1, e.g. 1-10 or 4,9")
    args = parse_args(parser, run_row, 2)
    if args is None:
        return
    for number in [ROWS.index(row) + 1 for row in parse_rows(args.rows)]:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                m = in_child(__file__, [str(number), tmp])
            except RuntimeError as exc:
                print(f"row {number}: FAILED: {exc}", file=sys.stderr)
                continue
        print(
            f"row {number} ({m['name']}, {m['gpus']} GPUs): wall {m['wall_s']:.1f} s, peak RSS "
            f"{m['peak_mib']:.0f} MiB, step {m['step_ns'] / 1e9:.2f} s, {m['tflops']:.1f} TFLOP/s per GPU"
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
