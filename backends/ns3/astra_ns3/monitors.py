"""What the ns-3 model measured: counters per port and per message, and samples.

:class:`Ns3Results` gathers, over every ``run()`` of one backend:

* ``ports()``: one row per egress port (= directed link ``link`` from ``node``
  to ``peer``): bytes and packets sent, drops (packets that found the node's
  buffer full, charged to the port they arrived on), ECN marks, PFC pauses
  sent/received and XONs sent, time spent paused, peak data queue, headroom;
* ``messages()``: one row per message: NPUs, bytes, start and finish (ns),
  flow completion time, packets sent, retransmitted packets, timeouts, CNPs
  sent/received, base RTT and the sender's final rate;
* ``queues()``: sampled data-queue bytes per port (monitor on; a port appears
  while its queue is non-empty, and once more when it empties);
* ``flow_samples()``: sampled bytes delivered, throughput since the previous
  sample and the sender's rate, per message in flight (monitor on).

``write(directory, "csv" | "parquet")`` writes the four tables (:func:`table_files`
names them, so that a command checks them against its own outputs before a run).
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from astra.plugin import ConfigError, PhysicalTopology

if TYPE_CHECKING:
    import pandas as pd

#: The tables the monitor writes, each ``<name>.<format>`` in its output_dir.
TABLES = ("ports", "messages", "queues", "flow_samples")

_PORT_SUMS = (
    "tx_bytes",
    "tx_packets",
    "drops",
    "ecn_marks",
    "pauses_sent",
    "resumes_sent",
    "pauses_received",
    "paused_ps",
)


class Ns3Results:
    """Counters and samples of every run of one :class:`~astra_ns3.network.Ns3Network`."""

    def __init__(self, physical: PhysicalTopology):
        self.physical = physical
        self.runs = 0
        links = physical.links_count
        self._ports = {k: np.zeros(links, dtype=np.int64) for k in _PORT_SUMS}
        self._max_queue = np.zeros(links, dtype=np.int64)
        self._headroom = np.zeros(links, dtype=np.int64)
        self._max_buffer = np.zeros(physical.nodes_count, dtype=np.int64)
        # One dict of numpy columns per run; pandas tables are built when asked for
        # (importing pandas would cost the caller a third of a second per process).
        self._messages: list[dict[str, Any]] = []  # per run: raw counters (add_run)
        self._message_count = 0
        self._queues: list[dict[str, Any]] = []
        self._samples: list[dict[str, Any]] = []
        self.misrouted = 0
        #: Time skipped by the model's steady-state fast-forward (ns, summed over the parts of
        #: the fabric that jumped), and its jumps.
        self.fast_forward_ns = 0.0
        self.fast_forwards = 0
        self.fast_forward_packet_hops = 0
        #: Messages started on a port whose queue pairs waited out a jump, and the ns left of it.
        self.fast_forward_conflicts = 0
        self.fast_forward_conflict_ns = 0.0

    def add_run(self, raw: dict[str, np.ndarray], sent: array, offset_ns: float) -> None:
        """Fold in one run's raw arrays (astra_ns3.native.Library.results) and its
        messages' ``(src NPU, dst NPU, bytes, tag)``, flat (4 per message, by id)."""
        from astra_ns3.native import PORT_FIELDS

        links = self.physical.links_count
        ports = raw["ports"][:links]
        col = {name: k for k, name in enumerate(PORT_FIELDS)}
        for key in _PORT_SUMS:
            self._ports[key][: len(ports)] += ports[:, col[key]]
        self._max_queue[: len(ports)] = np.maximum(
            self._max_queue[: len(ports)], ports[:, col["max_queue_bytes"]]
        )
        self._headroom[: len(ports)] = ports[:, col["headroom_bytes"]]
        self._max_buffer = np.maximum(self._max_buffer, raw["node_max_buffer"][: len(self._max_buffer)])
        self.misrouted += int(raw["misrouted"][0])
        self.fast_forward_ns += int(raw["fast_forward"][0]) / 1000
        self.fast_forwards += int(raw["fast_forward"][1])
        self.fast_forward_packet_hops += int(raw["fast_forward"][2])
        self.fast_forward_conflicts += int(raw["fast_forward"][3])
        self.fast_forward_conflict_ns += int(raw["fast_forward"][4]) / 1000
        first = self._message_count
        flows = raw["flows"]
        # (src, dst, bytes, tag) per message, in the caller's int64 buffer (no copy).
        per = np.frombuffer(sent, dtype=np.int64).reshape(-1, 4)
        src, dst = per[:, 0], per[:, 1]
        # Kept as the worker sent them (9 int64 a message): the table is built when asked.
        self._messages.append(
            {"run": self.runs, "first": first, "offset_ns": offset_ns, "flows": flows, "sent": per}
        )
        self._message_count += len(flows)
        if len(raw["queue_t_ps"]):
            link = raw["queue_port"]
            self._queues.append(
                {
                    "time_ns": offset_ns + raw["queue_t_ps"] / 1000,
                    "link": link,
                    "node": np.asarray(self.physical.link_src)[link],
                    "peer": np.asarray(self.physical.link_dst)[link],
                    "bytes": raw["queue_bytes"],
                }
            )
        if len(raw["flow_t_ps"]):
            local = raw["flow_id"]
            self._samples.append(
                {
                    "time_ns": offset_ns + raw["flow_t_ps"] / 1000,
                    "message": first + local,
                    "src": src[local],
                    "dst": dst[local],
                    "delivered_bytes": raw["flow_delivered"],
                    "rate_gbps": raw["flow_rate_bps"] / 1e9,
                }
            )
        self.runs += 1

    # -- tables ------------------------------------------------------------------------
    def ports(self) -> pd.DataFrame:
        import pandas as pd

        p = self.physical
        frame = pd.DataFrame(
            {
                "link": np.arange(p.links_count),
                "node": p.link_src,
                "peer": p.link_dst,
                "gbps": np.asarray(p.link_bandwidth) * 8,
            }
        )
        for key in _PORT_SUMS:
            frame[key] = self._ports[key]
        frame["paused_ns"] = frame.pop("paused_ps") / 1000
        frame["max_queue_bytes"] = self._max_queue
        frame["headroom_bytes"] = self._headroom
        return frame

    def messages(self) -> pd.DataFrame:
        return _concat(
            [_message_columns(run) for run in self._messages],
            ["run", "message", "src", "dst", "bytes", "start_ns", "finish_ns", "fct_ns"],
        )

    def queues(self) -> pd.DataFrame:
        return _concat(self._queues, ["time_ns", "link", "node", "peer", "bytes"])

    def flow_samples(self) -> pd.DataFrame:
        """Per sample: bytes delivered, the sender's rate and the throughput since the
        message's previous sample (Gbps)."""
        frames = []
        for run in self._samples:
            frame = _frame(run).sort_values(["message", "time_ns"], kind="stable")
            by = frame.groupby("message", sort=False)
            frame["throughput_gbps"] = by["delivered_bytes"].diff() * 8 / by["time_ns"].diff()
            frames.append(frame.sort_values(["time_ns", "message"], kind="stable"))
        return _concat(
            frames, ["time_ns", "message", "src", "dst", "delivered_bytes", "rate_gbps", "throughput_gbps"]
        )

    def node_max_buffer(self) -> np.ndarray:
        """Peak shared-buffer occupancy per node, bytes."""
        return self._max_buffer.copy()

    def totals(self) -> dict[str, Any]:
        """Whole-network counters (``packet_hops``: packets sent over any link)."""

        from astra_ns3.native import FLOW_FIELDS

        def total(column: str) -> int:
            k = FLOW_FIELDS.index(column)
            return int(sum(run["flows"][:, k].sum() for run in self._messages))

        return {
            "runs": self.runs,
            "messages": self._message_count,
            "packet_hops": int(self._ports["tx_packets"].sum()),
            "bytes_on_wire": int(self._ports["tx_bytes"].sum()),
            "drops": int(self._ports["drops"].sum()),
            "ecn_marks": int(self._ports["ecn_marks"].sum()),
            "pfc_pauses": int(self._ports["pauses_sent"].sum()),
            "cnps": total("cnps_sent"),
            "retransmits": total("retransmits"),
            "timeouts": total("timeouts"),
            "misrouted": self.misrouted,
            "fast_forward_ns": self.fast_forward_ns,
            "fast_forwards": self.fast_forwards,
            # of packet_hops, those skipped rather than simulated
            "fast_forward_packet_hops": self.fast_forward_packet_hops,
            "fast_forward_conflicts": self.fast_forward_conflicts,
            "fast_forward_conflict_ns": self.fast_forward_conflict_ns,
        }

    def write(self, directory: str | Path, kind: str = "csv") -> list[Path]:
        """Write ``ports``, ``messages``, ``queues`` and ``flow_samples`` tables, each through
        :func:`astra_core.outputs.atomic_output` (ConfigError naming a path it cannot write)."""
        from astra.plugin import atomic_output, check_output_dir

        out = check_output_dir(directory, "monitor output_dir")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"monitor output_dir {directory}: {exc.strerror or exc}") from None
        written = []
        for name, path in zip(TABLES, table_files(out, kind, "").values()):
            frame = getattr(self, name)()
            with atomic_output(path, "monitor output_dir") as temporary:
                if kind == "parquet":
                    frame.to_parquet(temporary, index=False)
                else:
                    frame.to_csv(temporary, index=False)
            written.append(path)
        return written


def table_files(directory: str | Path, kind: str, source: str) -> dict[str, Path]:
    """The files :meth:`Ns3Results.write` writes in ``directory``, by a label naming the
    config ``source`` and the key: ``{"ns3.toml: monitor.output_dir (ports.csv)": path}``."""
    return {
        f"{source}: monitor.output_dir ({name}.{kind})": Path(directory) / f"{name}.{kind}" for name in TABLES
    }


def _message_columns(run: dict[str, Any]) -> dict[str, Any]:
    """The messages table's columns of one run (Ns3Results.add_run's record)."""
    from astra_ns3.native import FLOW_FIELDS

    flows, sent, offset_ns = run["flows"], run["sent"], run["offset_ns"]
    f = {name: flows[:, k] for k, name in enumerate(FLOW_FIELDS)}
    start = offset_ns + f["start_ps"] / 1000
    finish = np.where(f["finish_ps"] >= 0, offset_ns + f["finish_ps"] / 1000, np.nan)
    return {
        "run": np.full(len(flows), run["run"]),
        "message": run["first"] + np.arange(len(flows)),
        "src": sent[:, 0],
        "dst": sent[:, 1],
        "bytes": sent[:, 2],
        "tag": sent[:, 3],
        "start_ns": start,
        "finish_ns": finish,
        "fct_ns": finish - start,
        "packets_sent": f["packets_sent"],
        "retransmits": f["retransmits"],
        "timeouts": f["timeouts"],
        "cnps_sent": f["cnps_sent"],
        "cnps_received": f["cnps_received"],
        "base_rtt_ns": f["base_rtt_ps"] / 1000,
        "final_rate_gbps": f["final_rate_bps"] / 1e9,
    }


def _frame(columns: dict[str, Any]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(columns)


def _concat(frames: list, columns: list[str]) -> pd.DataFrame:
    """One table of the runs' tables (or column dicts), with ``columns`` when empty."""
    import pandas as pd

    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat([f if isinstance(f, pd.DataFrame) else _frame(f) for f in frames], ignore_index=True)
