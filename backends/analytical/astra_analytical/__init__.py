"""astra's congestion-aware analytical network backend (upstream ASTRA-sim's model,
on any topology); the congestion-unaware one is the core's (:mod:`astra_core.analytical`)."""
