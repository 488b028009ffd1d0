"""Where trials run. Docker is the one backend today."""
