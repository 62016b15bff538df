"""What model code may reach: the bubblewrap sandbox acceptance commands run in (`sandbox`) and the
trust root with the control files no task may write (`trust`). Imports review (the rule folders) and core."""
