"""What the algorithms are built on: the server/client contract (`base`), synchronous rounds and partial
participation, the asynchronous server loop, the gradient-computing client, warm-up and staleness helpers."""
