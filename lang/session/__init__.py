"""The session layer: `tapeml.Session`, the Python API (session.py)."""
from tapeml.session.session import Session  # noqa: F401
