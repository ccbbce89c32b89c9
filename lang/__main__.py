"""`python -m tapeml`: the same command as `tapeml` (lang/cli.py)."""
from tapeml.cli import entry

if __name__ == "__main__":
    entry()
