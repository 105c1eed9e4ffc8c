"""Maps: profiles and the timeout maps derived from them.

Owns a profile's data on disk (``profile_data``, checked by
``summary_checks``), the pooled run-to-run
spread (``spread``), deriving and writing a timeout map (``timeout_map``),
where a map came from and in which mode it was measured (``provenance``),
and resolving each check's limit (``timeouts``). Running a profile is a
sweep, so it lives with the sweep (``runner.profile``).

May import: the core's base modules and ``runner.results``.
"""
