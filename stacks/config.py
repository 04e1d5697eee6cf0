"""Moved to config_model/ (issue 11): a re-export kept only while tests/test_operations.py, edited
elsewhere at the same time, still imports from here. Delete it once it imports config_model."""

from config_model import *  # noqa: F403
from config_model import __all__  # noqa: F401
