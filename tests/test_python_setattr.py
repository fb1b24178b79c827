"""`setattr` on a config section: a literal field name is an assignment; a name offlint cannot read (a loop over an
override dict read from a file, as Megatron Bridge PR 886's perf scripts apply a YAML file) may set any field, so
the section's fields are unknown after it, not the recipe's values (a false OFL102 error on that PR)."""

from __future__ import annotations

import textwrap

from offlint.api import CheckOptions, check

RECIPE = """
def recipe():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.pipeline_model_parallel_size = 4
{body}
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""


def _messages(tmp_path, monkeypatch, body: str) -> list[str]:
    (tmp_path / "recipe.py").write_text(RECIPE.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
    monkeypatch.chdir(tmp_path)
    result = check(["recipe.py"], CheckOptions(select=["OFL102"], mcore_version="0.20.0", root=tmp_path))
    assert not result.errors, result.errors
    return [f.message for f in result.findings]


def test_a_literal_field_name_is_an_assignment(tmp_path, monkeypatch):
    assert not _messages(tmp_path, monkeypatch, 'setattr(cfg.model, "pipeline_model_parallel_size", 1)')
    assert _messages(tmp_path, monkeypatch, 'setattr(cfg.model, "pipeline_model_parallel_size", 2)')


def test_a_name_offlint_cannot_read_makes_the_section_unknown(tmp_path, monkeypatch):
    assert not _messages(tmp_path, monkeypatch, """
        name, value = load_override()
        setattr(cfg.model, name, value)
    """)


def test_two_writes_by_names_offlint_cannot_read_keep_what_the_code_had_set(tmp_path, monkeypatch):
    """A second write by an unread field name over the first one's: it ended the file's reading with an internal
    error (NameError in the helper that keeps the value the code had set). The value before both is kept."""
    assert not _messages(tmp_path, monkeypatch, """
        name, value = load_override()
        setattr(cfg.model, name, value)
        other, again = load_override()
        setattr(cfg.model, other, again)
    """)
    from offlint.sources.python import read_python

    (unit,) = [u for u in read_python("recipe.py", (tmp_path / "recipe.py").read_text()) if u.name == "recipe"]
    held = {a.key: a.value for a in unit.all_assignments()}["model.pipeline_model_parallel_size"]
    assert held.before == 4, held


def test_a_loop_over_overrides_leaves_only_the_path_where_it_does_not_run(tmp_path, monkeypatch):
    found = _messages(tmp_path, monkeypatch, """
        for key, value in yaml.safe_load(open("o.yaml")).items():
            setattr(cfg.model, key, value)
    """)
    assert len(found) == 1 and "the loop body at recipe.py:7 does not run" in found[0]


# A script that applies a user's overrides as Megatron Bridge's apply_overrides and _restore_excluded_fields do: a
# walk down a dotted path by getattr, then a setattr by a field name offlint cannot read, in loops.
OVERRIDES = """
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
from megatron.bridge.training.pretrain import pretrain


def restore(config_obj, saved):
    for field_path, original in saved.items():
        parts = field_path.split(".")
        current = config_obj
        for part in parts[:-1]:
            current = getattr(current, part)
        setattr(current, parts[-1], original)


def apply(config_obj, overrides):
    for key, value in overrides.items():
        if isinstance(value, dict) and "_target_" in value:
            setattr(config_obj, key, instantiate(value))
            continue
        setattr(config_obj, key, value)


def main():
    args = parse_args()
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
{body}
    apply(cfg, load_overrides(args.config_file))
    restore(cfg, load_saved())
    pretrain(cfg, forward_step)
"""


def _strict(tmp_path, monkeypatch, body: str, strict: bool = True) -> list:
    (tmp_path / "train.py").write_text(OVERRIDES.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
    monkeypatch.chdir(tmp_path)
    result = check(["train.py"], CheckOptions(mcore_version="0.20.0", root=tmp_path, strict=strict))
    assert not result.errors, result.errors
    return result.findings


def test_strict_overrides_by_unreadable_names_leave_the_code_s_values(tmp_path, monkeypatch):
    """--strict: a write by a field name offlint cannot read may set any field, this one no more than the others.
    It had made every rule "possible" for such a script (110 findings on Megatron Bridge's example mains); the
    rules now ask what the script's own values give, as a call offlint does not follow leaves them."""
    found = _strict(tmp_path, monkeypatch, """
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "uniform"
        cfg.model.recompute_num_layers = 1
        cfg.model.cuda_graph_impl = "none"
        cfg.optimizer.use_distributed_optimizer = True
        cfg.ddp.use_distributed_optimizer = True
        cfg.optimizer.use_precision_aware_optimizer = True
    """)
    assert not [f for f in found if f.possible], [(f.code, f.message) for f in found]


def test_strict_still_reports_what_the_code_s_own_values_break(tmp_path, monkeypatch):
    body = """
        cfg.optimizer.use_distributed_optimizer = False
        cfg.ddp.use_distributed_optimizer = False
        cfg.optimizer.use_precision_aware_optimizer = True
    """
    found = [f for f in _strict(tmp_path, monkeypatch, body) if f.code == "OFL116"]
    assert len(found) == 1 and found[0].possible, found
    assert "the overrides it applies by field names offlint cannot read may change them" in found[0].message
    assert found[0].location.line == 30  # where the code set it, not the setattr that may have replaced it
    # without --strict the overrides may change it: no finding, as before
    assert not [f for f in _strict(tmp_path, monkeypatch, body, strict=False) if f.code == "OFL116"]


def test_strict_a_value_the_code_takes_from_a_flag_stays_unknown(tmp_path, monkeypatch):
    """A key the script's own code sets from the user's input is no catch-all write: still "possible"."""
    found = _strict(tmp_path, monkeypatch, """
        cfg.optimizer.use_distributed_optimizer = args.distributed
        cfg.ddp.use_distributed_optimizer = args.distributed
        cfg.optimizer.use_precision_aware_optimizer = True
    """)
    assert [f.code for f in found if f.possible] == ["OFL116"]


def test_a_value_set_in_a_loop_depends_on_the_loop_as_its_header_says():
    """'depending on `loop`' did not say which loop (a Bridge fork's apply_overrides, under --strict)."""
    from offlint.sources.python import read_python

    (unit,) = read_python("r.py", textwrap.dedent("""
        def apply(cfg, names, todo):
            for name in names:
                cfg.model.num_layers = 4
            while todo:
                cfg.model.hidden_size = 8
            return cfg
    """))
    reasons = {a.key: a.value.reason for layer in unit.layers for a in layer.assignments}
    assert reasons == {"model.num_layers": "4 or unset depending on `for name in names` (r.py:3)",
                       "model.hidden_size": "8 or unset depending on `while todo` (r.py:5)"}
