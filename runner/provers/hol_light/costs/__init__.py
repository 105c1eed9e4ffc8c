"""What HOL Light's images are expected to cost, for the planner: the plans
of a session's context tree (plans.py), the price of loading each image's
segment and the files it loads (context_costs.py, file_loads.py,
load_model.py, machine_code.py), the modes a timeout map's times are moved
between (map_modes.py), and `simulate --corpus`'s mode per check
(simulate_modes.py).

May import: the package's shared modules (install, contexts, ocaml_lexer,
load_graph), native/ (a native compile is priced at nothing when the
cache holds it: native_cache.py) and the core below planning (results, checks, maps); not
session/ or extract/.
"""
