"""The front end: tokens, the syntax tree, the parser, unparse and format specs (parsed). It imports
nothing of the layers above it: no tape, no values (tests/test_architecture.py)."""
