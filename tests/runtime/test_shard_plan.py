"""Shard plans (layer- and memory-wise) and the simulator's shards: hand-computed cases."""
from __future__ import annotations

import pytest
import torch

from edgesync.emulation.links import Link
from edgesync.models import build_model
from edgesync.models.shard_plan import layer_sizes, model_plan, plan
from edgesync.params import get_params
from edgesync.runtime.sim.shards import Shards


def test_layer_sharding_gives_each_shard_the_same_number_of_whole_layers():
    assert plan([10, 20, 30, 40], 2, "layer").bounds == ((0, 30), (30, 100))
    # 5 layers over 2 shards: the first takes the extra one
    assert plan([1, 1, 1, 1, 6], 2, "layer").bounds == ((0, 3), (3, 10))
    assert plan([1, 1, 1, 1, 6], 2, "layer").fractions == (0.3, 0.7)


def test_memory_sharding_splits_layers_into_equal_parameter_counts():
    assert plan([10, 20, 30, 40], 4, "memory").bounds == ((0, 25), (25, 50), (50, 75), (75, 100))
    assert plan([7], 3, "memory").bounds == ((0, 2), (2, 4), (4, 7))
    assert plan([10, 20], 1, "layer").bounds == ((0, 30),)


def test_impossible_plans_say_why():
    with pytest.raises(ValueError, match="3 layers for 4 shards"):
        plan([1, 2, 3], 4, "layer")
    with pytest.raises(ValueError, match="shards must be"):
        plan([1, 2, 3], 0, "memory")
    with pytest.raises(ValueError, match="sharding must be one of"):
        plan([1, 2, 3], 2, "rows")


def test_layers_follow_the_flat_parameter_vector():
    model = build_model("cnn")
    sizes = layer_sizes(model)
    assert len(sizes) == 4  # two conv, two linear: weight and bias together
    assert sum(sizes) == get_params(model).numel()


def test_the_vgg_like_model_leaves_layer_sharding_one_dominant_shard():
    """The shape behind EQ3's VGG-16 panel: one shard holds nearly every parameter layer-wise."""
    model = build_model("vgg_small")
    assert max(model_plan(model, 4, "layer").fractions) > 0.9
    assert model_plan(model, 4, "memory").fractions == pytest.approx((0.25,) * 4, abs=1e-6)


MB = 8.0  # a link of 8 Mbit/s carries one byte per microsecond


def test_one_update_through_two_shards_and_their_links():
    """1,000 bytes in, 1 ms of work, a 1,000-byte reply with 0.2 ms of encoding, 8 Mbit/s server links.
    Two shards with half each: each part (500 B) is in after 0.5 ms, each shard works 0.5 ms and
    encodes for 0.1 ms, its reply part is out 0.5 ms later."""
    two = Shards((0.5, 0.5), Link(rate_mbps=MB), Link(rate_mbps=MB))
    arrivals = two.arrive(0.0, 1000)
    assert arrivals == pytest.approx((0.0005, 0.0005))
    assert two.ready(arrivals) == pytest.approx(0.0005)
    done = two.serve(arrivals, 0.001)
    assert done == pytest.approx([0.001, 0.001])
    assert two.send(done, [1000], [0.0002]) == pytest.approx([0.0016])
    assert two.free == pytest.approx([0.0011, 0.0011])
    # one server: the whole message crosses one link, one thread does all the work
    one = Shards((1.0,), Link(rate_mbps=MB), Link(rate_mbps=MB))
    arrivals = one.arrive(0.0, 1000)
    assert one.send(one.serve(arrivals, 0.001), [1000], [0.0002]) == pytest.approx([0.0032])


def test_an_uneven_shard_is_the_bottleneck_and_queues_its_parts():
    """Two updates of 1,000 bytes at once; shard 1 owns 90%: its link carries 900 B of each (0.9 ms), so the
    second update's part waits for the first's; the server half handles an update when every shard has it."""
    shards = Shards((0.1, 0.9), Link(rate_mbps=MB), Link())
    first, second = shards.arrive(0.0, 1000), shards.arrive(0.0, 1000)
    assert first == pytest.approx((0.0001, 0.0009))
    assert second == pytest.approx((0.0002, 0.0018))
    assert shards.ready(first) == pytest.approx(0.0009)
    shards.send(shards.serve(first, 0.0), [], [])
    assert shards.ready(second) == pytest.approx(0.0018)


def test_a_query_is_the_leads_alone():
    shards = Shards((0.5, 0.5), Link(rate_mbps=MB), Link(rate_mbps=MB))
    shards.free = [0.0, 5.0]  # shard 1 is busy for long: the State Server on shard 0 answers anyway
    arrivals = shards.arrive(0.0, 100, shards.lead_only)
    assert arrivals == pytest.approx((0.0001, 0.0))
    assert shards.ready(arrivals, shards.lead_only) == pytest.approx(0.0001)
    done = shards.serve(arrivals, 0.001, shards.lead_only)
    assert shards.send(done, [100], [0.0], shards.lead_only) == pytest.approx([0.0012])
    assert shards.free == pytest.approx([0.0011, 5.0])


def test_a_message_cut_into_slices_and_joined_back():
    """θ = 0…9 over shards [0,3), [3,7), [7,10): dense tensors by range, a sparse pair by index (relative
    to each shard's start), the buffers with the lead; joining gives the message back."""
    from edgesync.runtime.sharding.slices import join, split

    bounds = ((0, 3), (3, 7), (7, 10))
    message = {"params": torch.arange(10.0), "buffers": torch.ones(4),
               "g.idx": torch.tensor([1, 4, 8, 9], dtype=torch.int32), "g.val": torch.tensor([1.0, 4.0, 8.0, 9.0])}
    parts = split(message, bounds)
    assert torch.equal(parts[1]["params"], torch.tensor([3.0, 4.0, 5.0, 6.0]))
    assert "buffers" in parts[0] and "buffers" not in parts[1] and "buffers" not in parts[2]
    assert parts[2]["g.idx"].tolist() == [1, 2] and parts[2]["g.val"].tolist() == [8.0, 9.0]
    assert parts[2]["g.idx"].dtype == torch.int32
    whole = join(parts, bounds)
    assert set(whole) == set(message)
    assert all(torch.equal(whole[k], message[k]) for k in message)


def test_a_slice_keeps_the_pieces_of_the_tensors_it_cuts():
    """Parameter tensors of 2, 5 and 3 values; shard 1 owns [3, 7): a piece of 4 of the second tensor."""
    from edgesync.algorithms.machinery.base import ModelState
    from edgesync.runtime.sharding.slices import sliced_state

    initial = ModelState(torch.arange(10.0), torch.ones(4), (2, 5, 3))
    bounds = ((0, 3), (3, 7), (7, 10))
    lead, middle, last = (sliced_state(initial, bounds, j) for j in range(3))
    assert lead.sizes == (2, 1) and middle.sizes == (4,) and last.sizes == (3,)
    assert torch.equal(middle.params, torch.tensor([3.0, 4.0, 5.0, 6.0]))
    assert lead.buffers.numel() == 4 and middle.buffers.numel() == 0
