"""Reporting: what a person reads about a sweep.

Owns the live screen (``progress``), ``proofbatch status`` (``status``), the
cost and throughput report (``report``) with its Limits section (``limits``)
and its ERRORs by cause (``error_causes``), two sweeps side by side
(``compare``), their HTML page (``html``), and pass@k (``passk``).

May import: every stage below it (``runner.results``, ``runner.checks``,
``runner.maps``, ``runner.planning``) and the core's base modules. Nothing
below imports reporting: the sweep hands it events and rows.
"""
