"""``python -m astra_core.cli``: the ``astra`` command."""

from astra_core.cli import main

main()
