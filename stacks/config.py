"""Moved to config_model/ (issue 11): a re-export kept only while components/operations.py,
components/ops_commands.py and tests/test_operations.py, edited elsewhere at the same time, still
import from here. Delete it once they import config_model."""

from config_model import *  # noqa: F403
from config_model import __all__  # noqa: F401
