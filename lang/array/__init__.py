"""The array layer: the tape, the one primitive table (primitive_table, ops and every *_ops module
with their VJPs), the values and their one printer, ranges, the size limits and the per-session
state slots. A second array backend goes here."""
