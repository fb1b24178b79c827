"""`offlint estimate`: a per-GPU memory model of a Megatron training configuration (pure arithmetic, no torch).

inputs (what the configuration says) -> params (parameter counts) -> memory (one GPU's breakdown) ->
whatif (the same with each memory knob turned) -> command (text, JSON, plot).
"""
