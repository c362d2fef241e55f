"""Ring all-reduce between live clients (`allreduce: ring`): the ring's set-up on the coordinator and each
client's part of the ring."""
