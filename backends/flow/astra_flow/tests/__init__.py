"""astra-flow's own tests; against an installed astra-core: ``pytest --pyargs astra_flow.tests``."""
