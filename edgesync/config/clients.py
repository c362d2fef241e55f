"""The scenario's `clients`: each one's device profile, partition, torch device, link and availability."""
from __future__ import annotations

from typing import Any

from pydantic import (ConfigDict, Field, SerializeAsAny, ValidationInfo, ValidatorFunctionWrapHandler, field_validator,
                      model_validator)

from edgesync.config.data import PartitionSpec
from edgesync.config.errors import Problem
from edgesync.config.limits import too_many_clients
from edgesync.config.links import LinkSpec
from edgesync.config.strict import Strict
from edgesync.emulation.availability import Availability, parse_availability
from edgesync.emulation.profiles import ConstantProfile, DeviceProfile, Profile, parse_profile


class ClientSpec(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True)  # frozen: clients alike share one (below)
    # a built-in kind, or an outside one (a DeviceProfile subclass: dumped with its own keys)
    profile: Profile | SerializeAsAny[DeviceProfile] = ConstantProfile(factor=1)
    partition: PartitionSpec | None = Field(None, description="this client's own split; default: the scenario's")
    device: str = Field("cpu", description="torch device: cpu, cuda:N or auto")
    link: LinkSpec | None = Field(None, description="this client's link, over the scenario's `links`")
    availability: Availability | None = Field(None, description="when the device is online: a trace of online "
                                              "intervals or an exponential on/off model; default always")

    @model_validator(mode="wrap")
    @classmethod
    def _once_per_mapping(cls, value: Any, handler: ValidatorFunctionWrapHandler,
                          info: ValidationInfo) -> "ClientSpec":
        """Thousands of clients (`count: 10000`, each variant of a sweep) repeat one mapping: validate
        each distinct one once per scenario validation (edgesync/config/validation.py gives the memo),
        which they share, as a frozen model."""
        memo = (info.context or {}).get("clients")
        if memo is None or not isinstance(value, dict):
            return handler(value)
        key = repr(value)
        if key not in memo:
            memo[key] = handler(value)
        return memo[key]

    @field_validator("profile", mode="before")
    @classmethod
    def _profile(cls, value: Any, info: ValidationInfo) -> DeviceProfile:
        return parse_profile(value, info.context)

    @field_validator("availability", mode="before")
    @classmethod
    def _availability(cls, value: Any, info: ValidationInfo) -> Availability | None:
        return parse_availability(value, info.context)


def expand_clients(value: Any) -> Any:
    """`clients: 4` means four undisturbed clients; `{count: 8, profile: gamma-hetero}` eight alike
    (any ClientSpec key besides count); a list gives each its own settings. At most MAX_CLIENTS,
    checked before the list is built."""
    if isinstance(value, bool):
        return value
    if problem := too_many_clients(value):
        raise problem
    if isinstance(value, dict) and "count" in value:
        count, rest = value["count"], {k: v for k, v in value.items() if k != "count"}
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise Problem("must be a whole number ≥ 1", repr(count), ("count",))
        return [dict(rest) for _ in range(count)]
    if isinstance(value, int):
        if value < 1:
            raise ValueError("needs at least one client")
        return [{} for _ in range(value)]
    if isinstance(value, list):
        return [{"profile": v} if isinstance(v, str) else v for v in value]
    return value
