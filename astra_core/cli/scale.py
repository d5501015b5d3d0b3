"""``astra scale``: a job's traces for a larger data-parallel degree (:mod:`astra_core.workload.scale`)."""

from __future__ import annotations

import json
import os
import re

import click

from astra_core.config.dims import parse_dims


@click.command()
@click.option("--workload", required=True, help="trace prefix: rank r reads PREFIX.r.et")
@click.option(
    "--comm-groups",
    type=click.Path(),
    help="its communicator-group JSON (default: PREFIX.comm_groups.json beside the traces, if any)",
)
@click.option(
    "--dp-to", "new_dp", required=True, type=click.IntRange(min=1), help="data-parallel replicas to write"
)
@click.option(
    "--output",
    required=True,
    help="trace prefix to write: rank r writes PREFIX.r.et; PREFIX.N.et files of an earlier, "
    "larger set (N past the new ranks) are removed",
)
@click.option(
    "--tp", type=click.IntRange(min=1), help="tensor-parallel size (default: from astra gen llm's metadata)"
)
@click.option("--pp", type=click.IntRange(min=1), help="pipeline stages (default: from the metadata)")
@click.option(
    "--cp", type=click.IntRange(min=1), help="context-parallel size (default: from the metadata, else 1)"
)
@click.option("--dims", help="network dimensions of the larger job, e.g. 8x8 (traces generated with --dims)")
def scale(workload, comm_groups, new_dp, output, tp, pp, cp, dims) -> None:
    """Write WORKLOAD's traces for --dp-to data-parallel replicas (weak scaling: each rank
    keeps its micro-batches), with its comm groups, sends and receives and data-parallel
    all-gathers resized.

    Ranks are in Megatron's order (tensor, context, data, pipeline; astra gen llm's):
    new rank (t, c, d', p) runs old rank (t, c, d' mod dp, p)'s trace. The layout
    comes from astra gen llm's metadata (expert parallelism included), or from --tp,
    --pp and --cp (the data-parallel size is then the ranks over their product); an
    option that contradicts the metadata is refused.

    The new set replaces whatever --output held: every PREFIX.N.et is written at once
    (all or none), then the PREFIX.N.et files of an earlier run with N at or past the
    new rank count are removed, so that astra run on PREFIX reads exactly this set.
    """
    from astra_core.config.comm_groups import groups_beside, load_comm_groups
    from astra_core.errors import ConfigError
    from astra_core.outputs import check_not_input, trace_outputs
    from astra_core.workload.chakra import read_workload
    from astra_core.workload.prefix import rank_count
    from astra_core.workload.scale import LLM_METADATA, scale_dp

    ranks = rank_count(workload)
    if not ranks:
        raise ConfigError(f"--workload: no trace files {workload}.<rank>.et")
    traces = read_workload(workload, ranks)
    comm_groups = comm_groups or groups_beside(workload)
    groups = load_comm_groups(comm_groups, ranks) if comm_groups else {}
    layout = _layout(traces[0].metadata.get(LLM_METADATA), f"{workload}.0.et", ranks, tp, pp, cp)
    _check_size(workload, ranks, new_dp / layout.dp, output, new_dp)
    scaled, new_groups = scale_dp(traces, groups, layout, new_dp, parse_dims(dims) if dims else None)
    groups_path = f"{output}.comm_groups.json"
    inputs = {"--workload": [f"{workload}.{r}.et" for r in range(ranks)], "--comm-groups": comm_groups}
    stale = _stale_ranks(output, len(scaled))
    if not new_groups and os.path.isfile(groups_path):  # an earlier set's: a run would read it
        stale.append(groups_path)
    outputs = {**trace_outputs(output, len(scaled)), "--comm-groups": groups_path}
    check_not_input({**outputs, **{f"--output (stale {path})": path for path in stale}}, inputs)
    _write(output, scaled, json.dumps(new_groups) if new_groups else None, groups_path)
    _remove(stale)
    click.echo(
        f"{ranks} ranks (dp {layout.dp}) -> {len(scaled)} ranks (dp {new_dp}): {output}.<rank>.et"
        + (f"; comm groups: {groups_path} (astra run reads it beside the traces)" if new_groups else "")
        + (f"; removed {len(stale)} files of an earlier set" if stale else "")
    )


def _check_size(workload: str, ranks: int, factor: float, output: str, new_dp: int) -> None:
    """Refuse, before any work, a set past astra's rank limit or past the room on disk:
    the scaled set has ``factor`` times the ranks, nodes and bytes of WORKLOAD's."""
    from astra_core.workload.trace_size import TraceSetSize, check_npus, check_trace_set

    source = f"--dp-to {new_dp}"
    new_ranks = round(ranks * factor)
    check_npus(source, new_ranks)
    nbytes = sum(os.path.getsize(f"{workload}.{r}.et") for r in range(ranks))
    check_trace_set(source, TraceSetSize(new_ranks, 0, 0, round(nbytes * factor)), output)


def _write(output: str, scaled, groups_json: str | None, groups_path: str) -> None:
    """Every rank's trace and the comm groups, all or none (:mod:`astra_core.workload.trace_set`)."""
    from astra_core.outputs import write_bytes
    from astra_core.workload.trace_set import staged_trace_set
    from astra_core.workload.writer import trace_bytes

    with staged_trace_set(output) as stage:
        for trace in scaled:
            write_bytes(stage.trace(trace.rank), trace_bytes(trace.nodes, trace.metadata, trace.version))
        if groups_json is not None:
            stage.later(groups_path, (groups_json + "\n").encode())


def _stale_ranks(prefix: str, count: int) -> list[str]:
    """The ``PREFIX.N.et`` files and links with ``N >= count`` (nothing else in the folder)."""
    folder, base = os.path.split(prefix)
    pattern = re.compile(re.escape(base) + r"\.(0|[1-9][0-9]*)\.et")
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    out = []
    for name in names:
        match = pattern.fullmatch(name)
        path = os.path.join(folder, name)
        if match and int(match.group(1)) >= count and (os.path.islink(path) or os.path.isfile(path)):
            out.append(path)
    return out


def _remove(paths: list[str]) -> None:
    """Remove ``paths``; raises ConfigError naming one that cannot be removed."""
    from astra_core.errors import ConfigError

    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigError(
                f"--output {path}: cannot remove this rank of an earlier set: {exc.strerror}"
            ) from None


def _layout(llm: object, where: str, ranks: int, tp: int | None, pp: int | None, cp: int | None):
    """The traces' layout: astra gen llm's metadata (in ``where``), else the options.
    Raises ConfigError for an option that contradicts the metadata, or sizes that do not fit."""
    from astra_core.errors import ConfigError
    from astra_core.workload.generators.layout import experts_folded
    from astra_core.workload.scale import Layout

    info = json.loads(llm) if isinstance(llm, str) else {}
    given = {"tp": tp, "pp": pp, "cp": cp}
    for key, value in given.items():
        if value is not None and key in info and value != info[key]:
            raise ConfigError(
                f"--{key}: {where}'s metadata (astra gen llm) says {key} {info[key]}, got {value}"
            )
    sizes = {"tp": tp or info.get("tp"), "pp": pp or info.get("pp"), "cp": cp or info.get("cp", 1)}
    missing = [f"--{k}" for k, v in sizes.items() if not v]
    if missing:
        raise ConfigError(f"astra scale: the traces do not say their layout; give {' and '.join(missing)}")
    t, p, c = int(sizes["tp"] or 1), int(sizes["pp"] or 1), int(sizes["cp"] or 1)
    if experts_folded(info.get("etp", t), t, c):
        raise ConfigError(
            f"astra scale: {where}'s experts are folded over tensor- or context-parallel ranks "
            "(expert-tensor parallelism 1), which astra scale does not carry over; generate them "
            "at the larger size instead"
        )
    if ranks % (t * p * c):
        raise ConfigError(f"astra scale: {ranks} ranks do not divide into tp x pp x cp = {t * p * c}")
    return Layout(t, c, ranks // (t * p * c), p, int(info.get("ep", 1)))
