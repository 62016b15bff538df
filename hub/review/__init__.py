"""Reading code without a model: ast-grep rules and their folder (`rules`), the community catalog
(`catalog`, data in `community/`), tree-sitter parsing and outlines (`code`). Imports state and core."""
