"""Deployable entry points for a lab's client machines: the ZeroMQ client script and the Flower ClientApps."""
