"""The repository: every git operation, whether the hub can work here, and the processes a killed hub
left behind. Imports only `hub.core`."""
