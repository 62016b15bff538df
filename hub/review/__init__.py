"""Reading code without a model: ast-grep rules and their folder (`rules`), scanning with them (`scan`),
the community catalog (`catalog`, data in `community/`), tree-sitter parsing and outlines (`code`), and
the repository map a task is shown (`repomap`: each file's definitions and the names it uses in `tags`,
their ranking for the task in `ranking`). Imports state and core."""
