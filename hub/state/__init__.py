"""A task's state on disk: the state machine, the contract and its validators, the handoff folder,
provenance records, circuit breakers, the backlog and notes. Imports only `hub.core`."""
