"""`offlint replay`: a short real megatron-core training run of one configuration, and `--verify` of its offloading.

mapping (unit -> megatron-core kwargs) -> launch (argv, torchrun, merge) -> train (each rank) -> result (schema,
classification) -> verify / sweep (criteria, table, plot). Kept import-light: ranks import `result` on GPU hosts.
"""
