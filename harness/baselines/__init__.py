"""Comparison baselines the harness runs beside liyuan; no app uses them.

:mod:`harness.baselines.agent` is a coding agent's own compaction (token trigger, cut
anywhere), kept to show and measure why role-play does not compact that way (#why-own).
It returns liyuan's :class:`~liyuan.compaction.CompactionOutcome`, so the comparison
reads both kinds of compaction through one type.
"""
