"""Base serializers: unknown input fields are errors, not silently dropped."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictSerializerMixin:
    """Reject keys that are not writable fields, so a typo in a CI payload fails loudly."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


class StrictSerializer(StrictSerializerMixin, serializers.Serializer):
    """A plain input serializer with unknown-field rejection."""


class StrictModelSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    """A model serializer with unknown-field rejection."""
