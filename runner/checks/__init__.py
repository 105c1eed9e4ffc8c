"""Checks: running one check, and the attempts a sweep is made of.

Owns the worker loop every executor runs (``worker``), the outside guard of
time and memory (``guard``), what a check's process tree uses
(``tree_sample``) and the priority it gives a check
(``priority``), the sandbox (``sandbox``), attempts and resume
(``attempts``, ``tasks``), how a context's proofs run (``context_proofs``),
the shared image server (``image_server``) and the scratch janitor
(``janitor``).

May import: the core's base modules and ``runner.results`` (a check is
published as a row). Never planning, maps or reporting: the screen learns of
a check through ``runner.events``, not by being called.
"""
