"""What the validation scripts share: the error summary and the report output."""

from __future__ import annotations

import math
from pathlib import Path


def geomean_abs(errors: list[float]) -> float:
    """Geometric mean of the absolute relative errors |predicted / published - 1|
    (each at least 0.01 %, so that an exact point does not zero the mean)."""
    return math.exp(sum(math.log(max(abs(e), 1e-4)) for e in errors) / len(errors))


def emit(text: str, markdown: str | None) -> int:
    """Print a report and, with ``markdown``, write it there too; exit status 0."""
    print(text)
    if markdown:
        Path(markdown).write_text(text + "\n")
    return 0
