"""guidebench: evidence-driven optimization and evaluation of the decision programs of autonomous loops."""

__version__ = "0.1.0"
