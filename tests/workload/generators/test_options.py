"""Generator options: every count or size that cannot be meant is a clear error, never a default
or a run that does not end."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.micro import parse_size
from astra_core.workload.generators.models import ModelConfig, check_model, load_model
from tests.fuzz.budget import wall_limit

H100 = GPUS["h100"]


def _gen_llm(tmp_path, *args):
    with wall_limit(20):
        return CliRunner().invoke(
            main, ["gen", "llm", "--model", "llama3-8b", "--dp", "2", "--output", str(tmp_path / "x"), *args]
        )


@pytest.mark.parametrize(
    "args, option",
    [
        (["--bucket-mb", "-1"], "--bucket-mb"),  # looped forever
        (["--bucket-mb", "0"], "--bucket-mb"),  # meant "use the default"
        (["--seq-len", "0"], "--seq-len"),  # meant "use the default"
        (["--seq-len", "-5"], "--seq-len"),
        (["--global-batch", "0"], "--global-batch"),
        (["--microbatches", "0"], "--microbatches"),
        (["--micro-batch", "-1"], "--micro-batch"),
        (["--dp", "0"], "--dp"),
        (["--tp", "-2"], "--tp"),
        (["--pp", "0"], "--pp"),
        (["--ep", "0"], "--ep"),
    ],
)
def test_llm_out_of_range_options_are_usage_errors(tmp_path, args, option):
    out = _gen_llm(tmp_path, *args)
    assert out.exit_code == 2, out.output
    assert f"Invalid value for '{option}'" in out.output
    assert not (tmp_path / "x.0.et").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--bucket-mb", "1e-9"],
            "--bucket-mb: must be a finite size of at least 1 byte",
        ),  # 0 bytes would loop forever
        (["--bucket-mb", "nan"], "--bucket-mb: must be a finite size"),  # not a ValueError traceback
        (["--bucket-mb", "inf"], "--bucket-mb: must be a finite size"),  # not an OverflowError traceback
        (["--dims=-1x-2"], "--dims: sizes must be >= 1, got '-1x-2'"),  # product 2, yet refused
        (
            ["--global-batch", "4", "--dims", "3"],
            "--dims 3: must multiply to dp x tp x pp x cp = 2",
        ),  # checked, not skipped
    ],
)
def test_llm_bad_values_are_one_line_errors(tmp_path, args, message):
    out = _gen_llm(tmp_path, *args)
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), out.output


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"bucket_bytes": 0}, "--bucket-mb: the gradient bucket must hold at least 1 byte, got 0"),
        ({"bucket_bytes": -5}, "--bucket-mb"),
        ({"seq_len": 0}, "--seq-len: must be an integer >= 1, got 0"),
        ({"global_batch": 0}, "--global-batch: must be an integer >= 1, got 0"),
        ({"microbatches": 0, "dp": 2}, "--microbatches: must be an integer >= 1, got 0"),
        ({"dims": [-2, -1]}, "--dims [-2, -1]: every dimension size must be an integer >= 1"),
        ({"dims": [3], "global_batch": 4}, "--dims 3: must multiply"),
    ],
)
def test_llm_config_rejects_what_the_cli_rejects(tiny_dense, kwargs, message):
    with wall_limit(20), pytest.raises(ConfigError) as info:
        generate_llm(LLMConfig(tiny_dense, H100, **kwargs))
    assert str(info.value).startswith(message)


def test_llm_seq_len_is_used_as_given(tiny_dense):
    # A given length changes the FLOPs (0 does not mean "the model's"); None keeps the model's
    default = sum(generate_llm(LLMConfig(tiny_dense, H100)).flops.values())
    same = sum(generate_llm(LLMConfig(tiny_dense, H100, seq_len=tiny_dense.seq_len)).flops.values())
    half = sum(generate_llm(LLMConfig(tiny_dense, H100, seq_len=tiny_dense.seq_len // 2)).flops.values())
    assert default == same and half < default


@pytest.mark.parametrize(
    "field, value",
    [("kv_heads", -4), ("head_dim", -64), ("shared_experts", -1), ("vocab", -1), ("dense_layers", -1)],
)
def test_model_file_negative_shapes(field, value):
    base = dict(name="m", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=1000)
    model = ModelConfig(**{**base, field: value})
    with pytest.raises(ConfigError, match=f"^m.yaml: {field}: must be"):
        check_model(model, "m.yaml")


def test_micro_size_past_int64_is_an_error():
    assert parse_size(str(2**63 - 1)) == 2**63 - 1
    with pytest.raises(ConfigError, match="more than a Chakra comm_size holds"):
        parse_size(str(2**63))  # not a ValueError traceback from the writer


@pytest.mark.parametrize(
    "args, option", [(["--npus", "0"], "--npus"), (["--iterations", "0"], "--iterations")]
)
def test_micro_out_of_range_options(tmp_path, args, option):
    base = {"--npus": "4", "--iterations": "1"}
    base.update(dict(zip(args[::2], args[1::2])))
    out = CliRunner().invoke(
        main,
        [
            "gen",
            "micro",
            "--collective",
            "all-reduce",
            "--size",
            "1MiB",
            "--output",
            str(tmp_path / "m"),
            *[x for kv in base.items() for x in kv],
        ],
    )
    assert out.exit_code == 2 and f"Invalid value for '{option}'" in out.output


@pytest.mark.parametrize(
    "value, message",
    [
        (True, "expected an integer, got true"),  # was one layer
        ("8", "expected an integer, got '8'"),
        (8.5, "expected an integer, got 8.5"),
        (2**31, "must be <= 2,147,483,647, got 2147483648"),
    ],
)
@pytest.mark.parametrize("key", ["layers", "hidden", "seq_len", "vocab", "experts", "kv_heads"])
def test_model_file_integer_keys_are_integers(tmp_path, key, value, message):
    base = {"layers": 4, "hidden": 256, "heads": 4, "ffn_hidden": 1024, "vocab": 1000}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**base, key: value}))
    with pytest.raises(ConfigError) as err:
        load_model(path)
    assert str(err.value) == f"{path}: {key}: {message}"


def test_model_file_problems_are_all_reported_at_once(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {"layers": True, "hidden": 256.0, "heads": 4, "ffn_hidden": 1024, "vocab": 0, "mlp": "relu"}
        )
    )
    with pytest.raises(ConfigError) as err:
        load_model(path)
    assert str(err.value).splitlines() == [
        f"{path}: layers: expected an integer, got true",
        f"{path}: mlp: expected one of gelu, swiglu, got 'relu'",
    ]
    path.write_text(json.dumps({"layers": 4.0, "hidden": 256.0, "heads": 4, "ffn_hidden": 1024, "vocab": 0}))
    model = load_model(path)
    assert (model.layers, model.hidden) == (4, 256) and isinstance(model.layers, int)


def test_a_sequence_whose_flops_pass_int64_names_the_node_and_field(tiny_dense):
    """seq_len 2^30 fits the file's range but its attention FLOPs pass Chakra's int64
    num_ops (one line, not a ValueError traceback from the ET writer)."""
    model = ModelConfig("m", layers=1, hidden=256, heads=4, ffn_hidden=1024, vocab=0, seq_len=2**30)
    with pytest.raises(ConfigError) as err:
        generate_llm(LLMConfig(model, H100))
    assert str(err.value) == (
        "--model m: seq_len 1,073,741,824, hidden 256, ffn_hidden 1,024, micro-batch 1: node "
        "L0_mb0_fwd_attn would need num_ops 1.181e+21, more than Chakra's int64 num_ops holds "
        "(9.223e+18); use smaller sizes"
    )


@pytest.mark.parametrize("scale", [0.9995, 1.0])
def test_values_at_a_fields_edge_are_compared_exactly(scale):
    """A value within 0.1 % under int64's largest fits; the float nearest that largest
    (2^63, one past it) does not: the screen on arrays hands the edge to the exact check."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.generators.llm_size import check_values
    from astra_core.workload.generators.llm_stage import StageNode

    model = ModelConfig("m", layers=1, hidden=256, heads=4, ffn_hidden=1024, vocab=0)
    fine = StageNode("fine", pb.COMP_NODE, duration_ns=1.0, flops=1e9)
    edge = StageNode("edge", pb.COMP_NODE, duration_ns=1.0, flops=scale * float(2**63 - 1))
    stages = [[fine, edge, fine]]
    if scale < 1:
        check_values(LLMConfig(model, H100), stages)
    else:
        with pytest.raises(ConfigError, match="node edge would need num_ops 9.223e"):
            check_values(LLMConfig(model, H100), stages)


def test_gen_llm_comm_groups_onto_a_rank_trace_is_refused(tmp_path):
    from tests.conftest import one_error_line

    out = tmp_path / "O" / "t"
    args = ["gen", "llm", "--model", "llama3-8b", "--dp", "2", "--tp", "2", "--output", str(out)]
    line = one_error_line(CliRunner().invoke(main, [*args, "--comm-groups", str(tmp_path / "O" / "t.0.et")]))
    assert (
        line
        == f"error: --comm-groups {tmp_path / 'O' / 't.0.et'}: is rank 0's trace of --output {out}; give another file"
    )
    assert not (tmp_path / "O").exists()
    # rank 4 is past the 4 ranks: not one of this set's traces
    ok = CliRunner().invoke(
        main, [*args, "--seq-len", "1024", "--comm-groups", str(tmp_path / "O" / "t.4.et")]
    )
    assert ok.exit_code == 0, ok.output
