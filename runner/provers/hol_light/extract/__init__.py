"""Cutting HOL Light proof files into a corpus, one problem per top-level
theorem (`proofbatch extract`: command_extract.py, extract.py): the files
read and checked (extract_files.py), reading a phrase as a theorem
(extract_scan.py), cutting a file (extract_cut.py), the loads a file's
problems need first (extract_prefix.py), the object files they read
(extract_objects.py), stable problem ids across versions (extract_ids.py),
and publishing the corpus (extract_out.py, extract_model.py).

It runs no prover: it reads files only.

May import: the package's shared modules (install, contexts, ocaml_lexer,
load_graph, object_reads) and the core below planning (results, checks, maps); not native/, costs/ or session/.
"""
