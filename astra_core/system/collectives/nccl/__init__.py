"""NCCL's collective model: its cost model (:mod:`.tuning`) first; algorithms,
protocols and channels as message plans build on it."""
