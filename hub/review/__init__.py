"""Reading code without a model: ast-grep rules and their folder (`rules`), scanning with them (`scan`),
the community catalog (`catalog`, data in `community/`), tree-sitter parsing and outlines (`code`).
Imports state and core."""
