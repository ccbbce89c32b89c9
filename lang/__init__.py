"""tapeml: a small interpreted matrix language for building, differentiating and training
transformer pieces by hand. `Interpreter().run(source)` is the one entry point."""
__version__ = "0.1.0"
