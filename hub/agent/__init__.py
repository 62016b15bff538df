"""Agent mode (issue 19): the implementer explores, edits and tests through tool calls in a bounded loop
of chat turns, instead of one prompt and one answer."""
