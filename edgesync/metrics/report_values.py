"""report.md's cells: numbers in the report's units and scenario values in a few words."""
from __future__ import annotations

import math
from typing import Any

from edgesync.metrics.formatting import NONE, num


BYTES_PER_MB = 1e6                 # the report's MB are decimal megabytes


def sig3(value: Any) -> str:
    """Three significant digits: gaps run from 1e-5 to 10."""
    v = num(value)
    return NONE if v is None else f"{v:.3g}"


def signed_pct(value: Any) -> str:
    return NONE if num(value) is None else f"{num(value):+.1%}"


def device_text(row: dict) -> str | None:
    """A client's device as the report shows it: 'cuda:0 (NVIDIA H100 80GB HBM3)' when its row names the GPU."""
    device, gpu = row.get("device"), row.get("gpu")
    if device is None or device == "":
        return None
    return f"{device} ({gpu})" if gpu and str(device).startswith("cuda") else str(device)


def nested(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def first_given(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def kind_name(value: Any) -> str | None:
    """The name of a scenario value given either as a string or as a mapping with a name/kind/type."""
    if isinstance(value, dict):
        value = first_given(value.get("name"), value.get("kind"), value.get("type"))
    return str(value).lower() if value is not None else None


def describe_value(value: Any) -> str:
    """A scenario value in a few words: 'dirichlet (alpha=0.5)' for {'kind': 'dirichlet', 'alpha': 0.5}."""
    if value is None or isinstance(value, (list, tuple)) and not value:
        return ""
    if isinstance(value, dict):
        key = next((k for k in ("name", "kind", "type") if isinstance(value.get(k), (str, int))), None)
        rest = ", ".join(f"{k}={v}" for k, v in value.items()  # paths say nothing about the experiment
                         if k != key and k not in ("root", "dir", "path") and isinstance(v, (str, int, float, bool)))
        head = str(value[key]) if key else ""
        return f"{head} ({rest})" if head and rest else head or rest
    if isinstance(value, (list, tuple)):
        return ", ".join(describe_value(v) for v in value)
    return str(value)


def cell_text(value: Any) -> str:
    return NONE if value is None or value == "" else str(value).replace("|", "\\|")


def times_text(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}×"


def rate_text(value: Any) -> str:
    v = num(value)
    return NONE if v is None else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def mb_text(value: Any) -> str:
    v = num(value)
    if v is None:
        return NONE
    mb = v / BYTES_PER_MB
    return f"{mb:,.2f}" if mb == 0 or abs(mb) >= 0.01 else f"{mb:.2g}"


def fixed_text(value: Any, digits: int) -> str:
    v = num(value)
    return NONE if v is None or math.isinf(v) else f"{v:.{digits}f}"
