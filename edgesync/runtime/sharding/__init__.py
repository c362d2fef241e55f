"""A coordinator sharded over K parameter servers (`sharding: layer | memory`): the lead, the shard servers
and the slices of the model they hold."""
