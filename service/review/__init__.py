"""Human review of a job's trials: which trials people review (sampling) and what they
said (the store's reviews), apart from HTTP and SQL."""
