"""How a value reads in a sweep variant's tag (`clients=8`) and a tuning run's label (`lr=0.05`)."""
from __future__ import annotations

import json
from typing import Any


def show_value(value: Any) -> str:
    if isinstance(value, dict) and "count" in value and set(value) <= {"count", "profile"}:
        return f"{value['count']}×{show_value(value.get('profile', 'x1'))}"  # clients: {count: 8, profile: x2}
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return "null" if value is None else str(value)
