"""The all-in-one process (``ncindex up``, :mod:`.embedded`) and the ``ncindex`` command
(:mod:`.cli`): a fourth app beside ``webhook_receiver``, ``workers`` and ``search_api``."""
