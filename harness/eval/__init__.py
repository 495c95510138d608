"""Evaluation: scorecards of runs, the strategy comparison, the per-beat overhead bench."""
