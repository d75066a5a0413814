"""ncindex/text."""
