"""soak: soak, load and upgrade tests for DNS servers."""

__version__ = "0.1.0"
