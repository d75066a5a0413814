"""ncindex/nextcloud."""
