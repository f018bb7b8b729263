"""Simplified Chinese date formats: 2026年11月30日 17:39:22 (Django's own zh_Hans formats fill in the rest)."""

DATE_FORMAT = "Y年n月j日"
TIME_FORMAT = "H:i:s"
DATETIME_FORMAT = "Y年n月j日 H:i:s"
SHORT_DATETIME_FORMAT = "Y年n月j日 H:i"
