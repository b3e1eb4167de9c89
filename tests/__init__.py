"""The test suite: shared fixtures in conftest.py, helper modules imported as `tests.<module>`."""
