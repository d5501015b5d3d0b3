"""The system layer: each rank's ET-node execution, collectives split into chunks
and phases over the network dimensions, scheduling, memory and rank symmetry."""
