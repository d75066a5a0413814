"""search_api."""
