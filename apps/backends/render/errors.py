"""The one error the renderers raise for input they cannot express."""

from __future__ import annotations


class RenderError(ValueError):
    """A desired state that a backend cannot be given as it is.

    `field` names the offending input (e.g. "queue research-vision/train: quota h100: lend_limit") and
    `reason` says why, so the API and the cluster page can show both without parsing the message.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")
