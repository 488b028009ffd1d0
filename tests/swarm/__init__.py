"""A throwaway multi-node Docker Swarm (tests/swarm/cluster.py) and the tests that it works."""
