"""The provers' packages, one a prover (hol_light/, isabelle/), each
exporting its descriptor as ``PROVER``. The registry that lists them and is
the one way into them is runner/prover_registry.py, below every stage that
asks it; nothing here is imported but a prover's own package."""
