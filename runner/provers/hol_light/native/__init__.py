"""Compiling HOL Light to native code: the build of the core, the server and
the answer front end into the cache (native_build.py, `proofbatch
build-native`: command_build_native.py), the compile of contexts, libraries
and answers into plugins for a running server (native_compile.py,
native_units.py, native_weak.py), and the markers of what the cache holds
(native_cache.py).

It runs no check: the native sessions that load these plugins are the image
sessions' (session/native_session.py).

May import: the package's shared modules (install, contexts, ocaml_lexer,
load_graph, ml/) and the core below planning (results, checks, maps); not costs/, session/ or
extract/.
"""
