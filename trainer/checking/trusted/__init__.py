"""The trusted side: the checker process (plan, stages, comparison, diagnosis).

Runs in a process forked by the checking server for one job. Never runs the
learner's code; holds everything the learner's answers are compared with.
"""
