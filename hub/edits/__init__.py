"""A model's text into file edits, in pipeline order: `answer` (the implementer's path through one reply:
its caps, a cut-off reply refused whole, what was not written), `feedback` (what goes back to the model,
worded by prompts/*.md templates), `parse` (the reply into edits, with `parse_blocks`,
`parse_diff`, `parse_tools` and `parse_paths` for SEARCH/REPLACE blocks, unified diffs, other tools' shapes
(JSON tool calls, Codex patches) and the lines naming a file; `edit`
holds the edits themselves), `policy` (where an edit may go: inside the allowed paths, never a control
file), `match` (search/replace against the file), `patch` (unified diffs via `git apply`), `check` (the
pre-write check, `formats` for files no grammar covers), `apply` (the plan, and the one place that writes it). Imports review (tree-sitter),
safety (trust), state and core."""
