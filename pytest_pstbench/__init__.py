"""pytest-pstbench: score photorealistic style transfer outputs under a fixed protocol."""

__version__ = "0.1.0"
