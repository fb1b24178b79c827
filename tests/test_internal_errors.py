"""A bug in checking one unit is that file's error (exit 2, the file named), not the end of the check: NeMo's
megatron_gpt_config.yaml once made the memory model's int() raise, and the whole run stopped with "offlint: error:
invalid literal for int() ..." naming no file."""

from __future__ import annotations

from offlint import engine
from offlint.api import CheckOptions, check

RECIPE = ("def {name}():\n"
          "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
          "                          ddp=DistributedDataParallelConfig())\n"
          "    cfg.model.cpu_offloading = True\n"
          "    cfg.model.recompute_granularity = 'full'\n"
          "    return cfg\n")


def test_a_unit_whose_check_fails_is_its_files_error_and_the_others_are_checked(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text(RECIPE.format(name="a_config"))
    (tmp_path / "b.py").write_text(RECIPE.format(name="b_config"))
    (tmp_path / "run.sh").write_text("python scripts/training/run_recipe.py --recipe a_config "
                                     "model.cpu_offloading=true\n")
    real = engine.check_unit

    def failing(resolved, rules, strict):
        if resolved.unit.name in ("a_config", ) or resolved.unit.name.startswith("run_recipe.py"):
            raise ValueError("invalid literal for int() with base 10: 'two'")
        return real(resolved, rules, strict)

    monkeypatch.setattr(engine, "check_unit", failing)
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, workers=1))
    assert sorted(e.path for e in result.errors) == ["a.py", "run.sh"]
    for error in result.errors:
        assert error.message.startswith("internal error while checking ") and "ValueError" in error.message
        assert error.message.endswith("please report it")
    assert {f.location.path for f in result.findings} == {"b.py"}  # OFL103 there, as without the bug
