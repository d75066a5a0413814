"""The Nextcloud simulator under its former name: ``ncindex.testing`` re-exports
:mod:`ncindex.simulator`, where it lives now."""

from ncindex.simulator import *  # noqa: F403
from ncindex.simulator import __all__  # noqa: F401
