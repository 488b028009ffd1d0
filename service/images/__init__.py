"""Building images on the control plane's Docker engine: the sandbox image and the Debian
base it may bootstrap, wheels for an image's Python, agent layers, and a team's builds and
probes under caps (the pen their steps share, the network and proxy they reach the mirrors
through). The Docker and Swarm backends run what is built here, and service/environments/
builds task environments with it; none of it knows what a job is."""
