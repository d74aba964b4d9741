"""The FGD paper's fragmentation benchmarks: replaying a task trace onto a fleet under a scheduling policy.

Weng et al., "Beware of Fragmentation" (USENIX ATC'23) evaluate policies by replaying a trace; this room
holds that replay as the paper's simulator does it (:mod:`gpuplace.fgd.paperreplay`, its workload and
metric in :mod:`gpuplace.fgd.paperworkload`), the earlier reshuffling replay (:mod:`gpuplace.fgd.replay`)
and ``gpuplace bench fragmentation``'s library side (:mod:`gpuplace.fgd.bench`). The fragmentation measure
itself, which the planner scores placements with, stays in :mod:`gpuplace.planner.fragmentation`.
"""
