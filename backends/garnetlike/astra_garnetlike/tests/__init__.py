"""astra-garnetlike's own tests; against an installed astra-core: ``pytest --pyargs astra_garnetlike.tests``."""
