"""Planning: the order and placement of checks, and what they will cost.

Owns the plan (``planner``), its inputs priced from profiles and maps
(``inputs``) and from what past sweeps measured (``learned_costs``), the
dispatcher that follows it (``dispatch``, with ``affinity``, ``chains``
and ``mem_classes``; ``live_queue`` for executors that run real checks), the
model of a node's images (``node_images``), the simulator (``simulate``),
the work left for an ETA (``work_left``), the bounds on the machines a
user describes (``sizes``), and a sweep's settings with what preparing it
resolved (``sweep_config``: the drivers, commands and provers read them).

May import: the core's base modules, ``runner.results``, ``runner.checks``
and ``runner.maps``. A prover's own costs come through the prover interface
(``runner.prover``, ``runner.prover_registry``), never from a prover's modules.
"""
