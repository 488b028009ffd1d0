"""examhall control plane: the API, the scheduler and the Docker backend that runs each trial."""

__version__ = "0.1.0"
