"""Practise writing backward passes of custom ``torch.autograd.Function`` classes.

Importing this package must stay cheap: only the checking child imports torch.
``trainer.check`` (the Python API, :mod:`trainer.api`) and the IPython extension
(``%load_ext trainer``, :mod:`trainer.notebook`) are imported when first used.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this import stays free of imports
if TYPE_CHECKING:
    from trainer.api import check as check


def __getattr__(name: str) -> object:
    """``from trainer import check`` imports the API on first use."""
    if name == "check":
        from trainer.api import check

        return check
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext trainer``: registers the ``%trainer`` line and cell magics."""
    from trainer.notebook import load_ipython_extension as load

    load(ipython)
