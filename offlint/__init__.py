"""offlint: a static linter for Megatron offload settings, and a bisect driver for offload regressions."""

__version__ = "0.1.0"
