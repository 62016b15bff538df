"""The repository: every git operation (`gitops`), what a killed git left behind (`killed_git`), whether
the hub can work here (`workspace`), the child processes the hub starts and ends (`child`), and those a
killed hub left behind (`leftovers`). Imports only `hub.core`."""
