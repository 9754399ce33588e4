"""The checking engine.

``runner`` (parent side, no torch) starts ``child`` (imports torch, runs the
learner's code) and turns what the child reports into a :class:`CheckReport`.
"""
