"""The scenario's links (`links`, a client's `link`, `coordinator_link`) and the emulated `Link`s they give."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from edgesync.config.strict import Strict
from edgesync.emulation.links import Link
from edgesync.emulation.traces import given_rows


class DirectionSpec(Strict):
    """One direction of a link; a key left out keeps the value it overrides."""

    rate_mbps: float | None = Field(None, gt=0, description="bandwidth, Mbit/s")
    latency_ms: float | None = Field(None, ge=0, description="one-way latency, ms")
    jitter_ms: float | None = Field(None, ge=0, description="latency varies uniformly within ± this, ms")
    loss: float | None = Field(None, ge=0, lt=1, description="packet loss probability (shows up as delay)")
    trace: list[tuple[float, float, float]] | None = Field(None, description="[[t s, rate Mbit/s, latency ms], …]: "
                                                         "from t on, the link's rate and latency (emulation/traces.py)")
    trace_file: str | None = Field(None, description="CSV/JSON file of such rows, relative to the scenario; read "
                                   "once when it loads (the run folder keeps the rows)")

    @model_validator(mode="before")
    @classmethod
    def _trace_rows(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (data.get("trace") is None and data.get("trace_file") is None):
            return data
        data = dict(data)
        rows = given_rows(data, "trace", "trace_file", ("t", "rate_mbps", "latency_ms"), "link trace",
                          (info.context or {}).get("base_dir"))
        for i, (_, rate, latency) in enumerate(rows):
            if rate <= 0 or latency < 0:
                raise ValueError(f"link trace row {i + 1}: the rate must be > 0 Mbit/s and the latency ≥ 0 ms, "
                                 f"got {rate:g} Mbit/s, {latency:g} ms")
        data["trace"] = [list(r) for r in rows]
        return data


class LinkSpec(DirectionSpec):
    """A client's link: values for both directions, with `up` (client → coordinator) and `down` overrides."""

    up: DirectionSpec | None = Field(None, description="client → coordinator overrides")
    down: DirectionSpec | None = Field(None, description="coordinator → client overrides")

    def direction(self, which: Literal["up", "down"]) -> DirectionSpec:
        base = {k: getattr(self, k) for k in DirectionSpec.model_fields}
        extra = getattr(self, which)
        if extra is not None:
            base.update({k: v for k, v in extra.model_dump().items() if v is not None})
        return DirectionSpec(**base)


def resolve_direction(which: Literal["up", "down"], *specs: "LinkSpec | None") -> DirectionSpec:
    """One direction of a link from specs in rising precedence (the scenario's `links`, a client's
    `link`); each spec's own `up`/`down` override its plain values."""
    merged: dict[str, Any] = {}
    for spec in specs:
        if spec is not None:
            merged.update(spec.direction(which).model_dump(exclude_none=True))
    return DirectionSpec(**merged)


def to_link(spec: DirectionSpec) -> Link:
    trace = tuple((t, rate, latency / 1e3) for t, rate, latency in spec.trace or ())
    return Link(rate_mbps=spec.rate_mbps, latency_s=(spec.latency_ms or 0.0) / 1e3,
                jitter_s=(spec.jitter_ms or 0.0) / 1e3, loss=spec.loss or 0.0, trace=trace)


class LinksSpec(LinkSpec):
    """The scenario's `links`: every client's link unless it sets its own, and how live runs emulate it."""

    backend: Literal["transport", "netns"] = Field("transport", description="live runs: pace messages in "
                                                   "the transport, or shape veth pairs in network namespaces "
                                                   "with tc (root; the transport adds what the kernel lacks)")
