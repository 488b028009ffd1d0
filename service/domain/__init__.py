"""What a job is, apart from HTTP and SQL: its request, its stored spec, its statuses, its plan."""
