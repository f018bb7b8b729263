"""gpuc: the GPU console's command line (docs/cli.md). It talks to the console over its REST API only."""

__version__ = "0.1.0"
