"""The ground floor: configuration (hub.yaml and its schema), the error tree, logging, atomic writes,
crash points for the tests, the redaction of secrets in prompts and records (`redaction`), and text
spelled one way everywhere (paths, long lists in messages).
Imports nothing of hub above it; every other package may import it."""
