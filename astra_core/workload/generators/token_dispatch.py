"""Token-based expert dispatch: what DeepEP and HybridEP send, rank to rank.

Megatron-core's flex token dispatcher (``--moe-token-dispatcher-type flex``) hands
the tokens to DeepEP (``--moe-flex-dispatcher-backend deepep``) or NVIDIA's HybridEP
(``hybridep``). Both are token-based: a token goes once to each rank that holds
any of its experts, not once per expert as the all-to-all dispatcher's permuted
rows do, and across NVLink domains once to each domain, to the GPU with the
sender's local index there, which forwards it over NVLink to the domain's ranks
that need it (DeepEP's README, "normal kernels": NVLink and RDMA forwarding;
Megatron-Core MoE report, arXiv 2603.07685, section 4.2.2 and figure 14). The
combine runs the same paths back, reducing within the domain and then across.

Under force-balanced routing (Megatron-core's ``moe_router_force_load_balancing``:
random logits, so each token's top-k is k distinct experts drawn uniformly) the
probability that a token needs a set of ``held`` of the ``E`` experts is
``1 - C(E - held, k) / C(E, k)``. A rank holds ``E / ep`` experts; a domain the
experts of its ``group`` expert-parallel ranks. DeepEP's NVLink peers are at most 8
(``NUM_MAX_NVL_PEERS`` in its ``deep_ep/buffer.py``: one RDMA rank per 8 GPUs);
HybridEP spans the whole NVLink domain, a GB200 / GB300 NVL72 rack included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from astra_core.errors import ConfigError

__all__ = ["FLEX_BACKENDS", "FLEX_SMS", "FlexDispatch", "check_backend", "hit_probability"]

#: Megatron-core's ``--moe-flex-dispatcher-backend`` values.
FLEX_BACKENDS = ("deepep", "hybridep")
#: DeepEP's NVLink peers per RDMA rank (``NUM_MAX_NVL_PEERS``).
DEEPEP_NVL_PEERS = 8
#: SMs each backend's dispatch and combine kernels hold by default: Megatron-core's
#: ``moe_deepep_num_sms`` (20) and ``moe_hybridep_num_sms`` (16, "in pure NVL scenarios, 16
#: SMs can generally achieve good bandwidth"), ``megatron/core/transformer/transformer_config.py``.
FLEX_SMS = {"deepep": 20, "hybridep": 16}


def check_backend(backend: str) -> None:
    """Raise ConfigError unless ``backend`` is one of :data:`FLEX_BACKENDS`."""
    if backend not in FLEX_BACKENDS:
        raise ConfigError(
            f"--moe-flex-dispatcher-backend: expected one of {', '.join(FLEX_BACKENDS)}, got {backend!r}"
        )


def hit_probability(experts: int, top_k: int, held: int) -> float:
    """Probability that a token's ``top_k`` distinct experts, drawn uniformly from
    ``experts``, include at least one of ``held`` given ones: ``1 - C(E - held, k) / C(E, k)``."""
    if held >= experts:
        return 1.0
    return 1.0 - math.comb(experts - held, top_k) / math.comb(experts, top_k)


@dataclass(frozen=True)
class FlexDispatch:
    """The bytes a token-based dispatch moves between the ``ep`` ranks of one
    expert-parallel group, whose members sit ``group`` to an NVLink group (index
    ``q`` in NVLink group ``q // group`` at local index ``q % group``).

    ``rank_share``: the probability a token needs a given other rank;
    ``group_share``: that it needs a given other NVLink group."""

    ep: int
    group: int
    rank_share: float
    group_share: float

    @classmethod
    def of(cls, experts: int, top_k: int, ep: int, stride: int, domain: int, backend: str) -> FlexDispatch:
        """The dispatch of ``top_k`` of ``experts`` experts over ``ep`` ranks that are
        ``stride`` global ranks apart, on NVLink domains of ``domain`` GPUs (0: one
        domain for every rank). Raises ConfigError for an unknown backend, or expert-parallel
        ranks that do not split evenly over the NVLink domains."""
        check_backend(backend)
        if not domain or (domain % stride == 0 and (domain // stride) % ep == 0):
            span = ep  # the whole group in one NVLink domain
        elif domain % stride == 0 and ep % (domain // stride) == 0:
            span = domain // stride
        elif stride % domain == 0:
            span = 1  # every member in a domain of its own
        else:
            raise ConfigError(
                f"--moe-token-dispatcher flex: {ep} expert-parallel ranks {stride} apart do not "
                f"split evenly over NVLink domains of {domain} GPUs"
            )
        group = min(span, DEEPEP_NVL_PEERS) if backend == "deepep" else span
        if ep % group:
            raise ConfigError(
                f"--moe-flex-dispatcher-backend deepep: {ep} expert-parallel ranks past one "
                f"node need a multiple of its {DEEPEP_NVL_PEERS} NVLink peers"
            )
        per_rank = experts // ep
        return cls(
            ep,
            group,
            hit_probability(experts, top_k, per_rank),
            hit_probability(experts, top_k, per_rank * group),
        )

    @property
    def groups(self) -> int:
        return self.ep // self.group

    def rows_to(self, q: int, rows: float) -> list[float]:
        """The rows (tokens) index ``q`` sends each member toward the experts, of its
        ``rows`` tokens: to its NVLink group's ranks its own and those it forwards for
        the other groups (``groups x rows x rank_share`` each); to the member at its
        local index in every other group the tokens that group needs; to no one else.
        Balanced routing makes the pattern symmetric: what q sends j, j sends q."""
        g, here = self.group, q // self.group
        out = []
        for j in range(self.ep):
            if j // g == here:
                out.append(rows * self.rank_share * (1 if j == q else self.groups))
            else:
                out.append(rows * self.group_share if j % g == q % g else 0.0)
        return out

    def received(self, rows: float) -> float:
        """The distinct (token, rank) rows a rank's experts get, every member's
        ``rows`` tokens counted once per rank that needs them."""
        return self.ep * rows * self.rank_share
