"""Hypothesis strategies for astra's inputs: config documents, topology files
and Chakra traces, valid ones and the mutations users (and bit rot) make."""

from __future__ import annotations

from hypothesis import strategies as st

#: system.json keys astra knows (upstream's), plus a misspelling.
SYSTEM_KEYS = [
    "scheduling-policy",
    "collective-optimization",
    "endpoint-delay",
    "local-reduction-delay",
    "active-chunks-per-dimension",
    "preferred-dataset-splits",
    "all-reduce-implementation",
    "all-gather-implementation",
    "reduce-scatter-implementation",
    "all-to-all-implementation",
    "all-reduce-implementation-custom",
    "per-node-custom-implementation",
    "roofline-enabled",
    "peak-perf",
    "local-mem-bw",
    "model-shared-bus",
    "L",
    "o",
    "g",
    "G",
    "trace-enabled",
    "replay-only",
    "track-local-mem",
    "local-mem-trace-filename",
    "boost-mode",
    "intra-dimension-scheduling",
    "all-reduce-implmentation",
]
NETWORK_KEYS = ["topology", "npus_count", "bandwidth", "latency", "links"]
MEMORY_KEYS = ["memory-type", "remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node"]

#: Scalars that break naive code: huge, negative, zero, non-finite, wrong type.
nasty_scalars = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 1e-320, float("nan"), float("inf"), 0.5]),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(
        [
            "ring",
            "direct",
            "halvingDoubling",
            "doubleBinaryTree",
            "Ring",
            "Switch",
            "FullyConnected",
            "LIFO",
            "FIFO",
            "EXPLICIT",
            "baseline",
            "localBWAware",
            "NO_MEMORY_EXPANSION",
            "MEMORY_POOL",
            "1e3",
            "nan",
        ]
    ),
)
nasty_values = st.one_of(
    nasty_scalars,
    st.lists(nasty_scalars, max_size=4),
    st.dictionaries(st.text(max_size=6), nasty_scalars, max_size=3),
)


def mutated(base: dict, keys: list[str]) -> st.SearchStrategy[dict]:
    """``base`` with some keys dropped, set to nasty values, or added."""
    edit = st.tuples(
        st.sampled_from(keys + list(base)), st.one_of(st.just(None), nasty_values), st.booleans()
    )

    def apply(edits):
        doc = dict(base)
        for key, value, drop in edits:
            if drop:
                doc.pop(key, None)
            else:
                doc[key] = value
        return doc

    return st.lists(edit, min_size=1, max_size=4).map(apply)


#: One cable line of a topology file: mostly plausible tokens, sometimes junk.
_rate = st.one_of(
    st.sampled_from(
        [
            "100Gbps",
            "400Gbps",
            "1Gbps",
            "0Gbps",
            "-5Gbps",
            "1e400Gbps",
            "nanGbps",
            "100",
            "100Mbps",
            "3.5Tbps",
        ]
    ),
    st.text(max_size=6),
)
_delay = st.one_of(
    st.sampled_from(["0.001ms", "1us", "0ms", "-1ms", "500ns", "1e400ms", "infms"]), st.text(max_size=6)
)
_node = st.one_of(st.integers(min_value=-2, max_value=12), st.just(10**12), st.text(max_size=3))


@st.composite
def topology_texts(draw) -> str:
    """An ns-3 style topology file: header, switch line, cable lines, often mangled."""
    nodes = draw(
        st.one_of(st.integers(min_value=0, max_value=12), st.just(10**9), st.just(-3), st.text(max_size=4))
    )
    switches = draw(st.one_of(st.integers(min_value=0, max_value=4), st.text(max_size=3)))
    links = draw(st.one_of(st.integers(min_value=0, max_value=12), st.just(10**9), st.text(max_size=3)))
    switch_ids = draw(st.lists(_node, max_size=4))
    cables = draw(
        st.lists(st.tuples(_node, _node, _rate, _delay, st.sampled_from(["0", "0.1", "x", ""])), max_size=10)
    )
    lines = [f"{nodes} {switches} {links}", " ".join(map(str, switch_ids))]
    lines += [" ".join(map(str, c)) for c in cables]
    if draw(st.booleans()):
        lines = lines[: draw(st.integers(min_value=0, max_value=len(lines)))]
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n# end\n"]))
