"""conda-distro: run an integration-tested conda distribution for the PyTorch ecosystem."""

__version__ = "0.1.0"
