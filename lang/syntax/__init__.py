"""The front end: tokens, the syntax tree, the parser, unparse and format specs (parsed). It imports
nothing of the layers above it: no tape, no values (tests/end_to_end/test_architecture.py)."""
