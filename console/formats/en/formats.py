"""English date formats of the console: numeric, sortable timestamps (what on-call reads and pastes).

The templates name formats (`|date:"DATETIME_FORMAT"`) instead of spelling them, so each language
gets its own; console/formats/zh_Hans/formats.py is the Chinese counterpart.
"""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
