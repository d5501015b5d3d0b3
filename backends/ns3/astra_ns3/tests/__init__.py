"""astra-ns3's own tests; against an installed astra-core: ``pytest --pyargs astra_ns3.tests``."""
