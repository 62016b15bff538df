"""A model's text into file edits, in pipeline order: `parse` (the reply into edit blocks), `match`
(search/replace against the file), `patch` (unified diffs via `git apply`), `check` (the pre-write check),
`apply` (inside the allowed paths, never a control file). Imports review (tree-sitter), safety (trust),
state and core."""
