"""agent-hub."""
