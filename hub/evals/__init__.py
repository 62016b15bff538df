"""`hub eval`: a suite of exercises (exercism's practice layout) through the whole pipeline against the
configured model servers, and a report of what became of each (`suite`, `run`, `report`). It drives the
real `hub` CLI in subprocesses and reads the state it leaves; it imports phases and the floors below."""
