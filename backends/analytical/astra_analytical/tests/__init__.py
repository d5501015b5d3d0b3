"""astra-analytical's own tests; against an installed astra-core: ``pytest --pyargs astra_analytical.tests``."""
