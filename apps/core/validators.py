"""Validators for names that end up in Kubernetes objects or Slurm commands."""

from django.core.validators import RegexValidator

# RFC 1123 label, as Kubernetes requires for namespaces and most names.
dns1123_label = RegexValidator(
    regex=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    message="Use lower-case letters, digits and '-', starting and ending with a letter or digit "
    "(a DNS-1123 label, at most 63 characters).",
    code="dns1123_label",
)
