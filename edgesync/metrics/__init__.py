"""Run folders: the recorder that writes them, their summary, and the report rendered from them.

`edgesync.metrics.report` (matplotlib) is not imported here, so clients can record without it.
"""

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.metrics.summary import summarize

__all__ = ["RunRecorder", "read_jsonl", "summarize"]
