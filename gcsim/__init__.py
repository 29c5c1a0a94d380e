"""gcsim: gradient-coding straggler simulator and real Ray executor."""
__version__ = "0.1.0"
