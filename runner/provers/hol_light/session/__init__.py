"""HOL Light's checks, run in images: the bytecode backend and its fork
server (backend.py, fork_server.py, fork_session.py, image_tree.py,
image_logs.py; a jailed check's files and run in jailed_check.py, its
verdict record read in verdict_record.py), the native backend that forks
the same way from the compiled server (native.py, native_session.py,
native_contexts.py), the choice of mode per check (native_auto.py), what
a problem's check depends on (context_inputs.py), and `proofbatch serve`
(command_serve.py).

May import: the package's shared modules (install, contexts, ocaml_lexer,
load_graph, ml/), native/ (the build and the compiler its native sessions
use), costs/ (the image plans and a map's modes) and the core below
planning (results, checks, maps: planning asks the registry, which reaches
this package); not extract/.
"""
