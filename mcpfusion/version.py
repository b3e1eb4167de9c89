"""The version of mcpfusion (one place; `mcpfusion.__version__` re-exports it)."""

__version__ = "0.1.0"
