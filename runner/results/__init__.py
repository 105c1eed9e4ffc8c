"""Results: what a sweep directory holds, and the one way to write and read it.

Owns the result row (``rows``), the shard streams and their scan
(``shards``, ``done``, ``compaction``), ``results.csv`` (``csv_table``),
atomic publication (``publish``), the running board (``running``), the
driver's heartbeat (``heartbeat``), the one-runner lock (``lock``) and
``sweep.json`` as the commands that only look read it (``sweep_manifest``).

May import: the core's base modules (``errors``, ``verdicts``, ``settings``,
``corpus``, ``answers``, ``prover``, ``events``, ``sizes``, ``subproc``).
Results know nothing of the stages that read them: checks write rows,
planning, maps and reporting read them.
"""
