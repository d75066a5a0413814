"""webhook_receiver."""
