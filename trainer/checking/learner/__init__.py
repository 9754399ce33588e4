"""The learner's side: the zygote and the process that runs the learner's file.

Every module here is loaded before the zygote is forked, and none may import
the trusted side: the learner's process must never hold the checker's code
paths to a plan, a reference or an expected value.
"""
