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


def test_a_loop_over_overrides_leaves_only_the_path_where_it_does_not_run(tmp_path, monkeypatch):
    found = _messages(tmp_path, monkeypatch, """
        for key, value in yaml.safe_load(open("o.yaml")).items():
            setattr(cfg.model, key, value)
    """)
    assert len(found) == 1 and "the loop body at recipe.py:7 does not run" in found[0]
