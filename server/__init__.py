"""Deployable entry points for a lab's server: the ZeroMQ coordinator script and the Flower ServerApp."""
