"""`python -m tapeml`: the same command as `tapeml` (lang/faces/cli.py)."""
from tapeml.faces.cli import entry

if __name__ == "__main__":
    entry()
