"""ncindex/store."""
