"""Flask and WSGI plumbing the HTTP apps share: problem+json (:mod:`.problems`), health,
caller authentication, rate limits, the servers' own error answers and one WSGI app for two
(:mod:`.dispatch`). The write path (index/, sync/) never imports it."""
