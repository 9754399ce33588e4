"""The default of each limit and option of a check, set once.

The command line (``check``, ``grade``), the notebook magics, the Python API, grading
and the runner take their defaults from here; the learner's process receives the
values in its job and spawn header, never a default of its own. No imports: any
module of either side may read it.
"""

DEFAULT_SEED = 0  # torch.manual_seed for the random inputs and upstream gradients
DEFAULT_TIMEOUT = 30.0  # seconds before a check is stopped
DEFAULT_MEMORY_LIMIT_MB = 4096  # on top of what torch maps; enough for any exercise
DEFAULT_SCRATCH_MB = 64  # the learner's private tmpfs: its only writable place
