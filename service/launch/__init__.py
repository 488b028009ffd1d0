"""Running a worker in a sandbox, for any backend: the launch, the conversation over its
channel, the deadline, and the trial's one settled result."""
