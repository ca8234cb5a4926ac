"""Chunk planning: key order in Python, pure range arithmetic, and the planner."""
