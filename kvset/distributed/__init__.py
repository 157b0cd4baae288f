"""Past one machine: a trace's exact curve computed in partitions on Dask workers and merged in order.

The per-partition state and its ordered merge are kvset.core.partial_stack (exact) and
kvset.core.partial_sample (--sample); this package reads the partitions where their bytes are
(partitions, worker), merges a worker's run of them where they were analysed (tree) and runs the
tree of merges across the workers on Dask (driver), whose packages only it imports.
"""
