"""The HTTP control plane."""
