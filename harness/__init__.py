"""Simulation harness: runs liyuan on scripted sessions and writes every prompt and output to sim/."""
