"""DeviceShare scoring kernels: GPU node state, FGD's fragmentation measure, and node-scoring policies.

Pure functions over arrays (no service state): :mod:`.state` holds the per-GPU node table and pod shapes,
:mod:`.frag` the fragmentation measure of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent" (USENIX ATC'23), :mod:`.policies` the paper's baselines and FGD,
:mod:`.fgdplus` our policy (FGD+: fragmentation gradient plus CPU-stranded GPU); :mod:`.plugin` the scheduler
plugin that assigns GPUs at Reserve (:mod:`.book` its per-node bookings). ``docs/gpu.md`` defines every term and gives the bench figures.
"""
