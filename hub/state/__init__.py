"""A task's state on disk: the state machine, the contract (its shape, schema and validators, its file, a
new task's), judge reports, the handoff folder, provenance records, circuit breakers, the backlog and
notes. Imports only `hub.core`."""
