"""Rule conditions: a small, safe expression language with three-valued logic, and the helper functions it may call.

A condition is a Python expression (parsed with `ast`, never `eval`ed) over canonical keys
(`model.cpu_offloading and model.pipeline_model_parallel_size > 1`) and the helper functions below.
Every key reads as its effective value; an unknown value makes every expression that depends on it unknown,
except where Kleene logic decides anyway (`False and ?` is False, `True or ?` is True).
The evaluator records which keys it read and which of them were unknown, for related locations and --strict.

Where things are (a rule's YAML names its helper functions; `functions.py` maps each name to its module):
- `scope.py`: the Scope a check gives the evaluator, UNKNOWN, and the markers a helper function carries;
- `language.py`: parsing and compiling a condition, evaluating it;
- `functions.py`: the helper functions by name, the only calls a condition may make;
- `values.py`: helpers on plain values (lists, strings, dtypes); `settings.py`: on how a unit sets its keys
  (known fields, suggestions, defaults, which write wins); `module_names.py`: offload, CUDA graph and recompute
  module names;
- one module per family of checks: `memory.py` (OFL303-OFL305), `layout.py` (OFL216-OFL218, OFL221),
  `graphs.py` (OFL121, OFL223, OFL225, OFL226), `ep_overlap.py` (OFL219, OFL224), `precision.py` (OFL117,
  OFL122).
"""

from offlint.conditions.functions import FUNCTIONS
from offlint.conditions.language import COMPARE, compile_condition, evaluate
from offlint.conditions.scope import UNKNOWN, ConditionError, Scope, truth

__all__ = ["COMPARE", "FUNCTIONS", "UNKNOWN", "ConditionError", "Scope", "compile_condition", "evaluate", "truth"]
