"""Running probe steps as Slurm jobs: one sbatch script per step, plain sbatch/squeue/scontrol/scancel.

`SlurmRunner` implements `offlint.steps.StepRunner`; `outcome_for_state` maps a Slurm job state onto the
shared outcome classes. docs/slurm.md has the design notes.
"""

from offlint.slurm.commands import SlurmError
from offlint.slurm.options import SlurmOptions, SlurmOptionsError
from offlint.slurm.runner import SlurmRunner
from offlint.slurm.script import render_script
from offlint.slurm.states import outcome_for_state, scheduler_outcome

__all__ = ["SlurmError", "SlurmOptions", "SlurmOptionsError", "SlurmRunner", "outcome_for_state",
           "render_script", "scheduler_outcome"]
