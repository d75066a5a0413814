"""From Nextcloud events to tasks: envelope to plan (:mod:`.events`), debounce and enqueue
(:mod:`.queueing`), and the webhook listeners ncindex registers (:mod:`.registration`)."""
