"""astra's ``ns3`` network backend: RDMA over Converged Ethernet on ns-3.

Packet-level RoCEv2 with DCQCN, HPCC or no congestion control, PFC and
per-flow ECMP, written in C++ against the ``ns3`` wheel (``astra_ns3/cpp``)
and run in a worker process. Importing this package loads nothing heavy:
ns-3 is only ever loaded inside the worker (:mod:`astra_ns3.worker`).
"""
