"""The repository: every git operation (`gitops`), what a killed git left behind (`killed_git`), whether
the hub can work here (`workspace`), and the processes a killed hub left behind (`leftovers`). Imports
only `hub.core`."""
