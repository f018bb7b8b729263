"""English text made from marked templates, put in the reader's language where it reaches a page or an API client.

Pure code (the spec parser, admission, the health rules) imports no Django, so it cannot call gettext. It
builds its English sentences from templates marked for makemessages instead, and the layer that shows them
translates:

    N_("must be an integer, not %(type)s", type=type_name(value))   # a Text: str == the English sentence
    translate(text)                                                 # the sentence in the active language

`N_` is a keyword of makemessages (apps/core/management/commands/makemessages.py adds `--keyword=N_`).
A `Text` is a `str` (its English rendering), so code and tests that compare or join messages see English;
it also keeps its template and parameters, and `translate` renders the translated template with the
parameters, translating those that are `Text` too (a type name, a "tenant slug"). Plain strings pass
through unchanged: values from the input stay as they are.

`gettext_noop` marks English kept as a plain string (a default rule title, a fixed reason) that is stored
or compared in English and translated where a page shows it (apps/core/stored_text.py).
"""

from __future__ import annotations


def gettext_noop(text: str) -> str:
    """Marks `text` for makemessages (which knows this name) and returns it unchanged; no Django needed."""
    return text


class Text(str):
    """An English sentence (the str value) that remembers the marked template and parameters it came from."""

    template: str
    params: dict

    def __new__(cls, template: str, params: dict | None = None) -> Text:
        params = dict(params or {})
        self = super().__new__(cls, template % params if params else template)
        self.template = template
        self.params = params
        return self

    def __reduce__(self):  # pickles (Celery, caches) as the same Text
        return (Text, (self.template, self.params))


def N_(template: str, /, **params) -> Text:
    """`template` % `params` in English, marked for translation and translated later by `translate`."""
    return Text(template, params)


def translate(value):
    """A Text in the active language (its parameters too, where they are Texts); anything else unchanged.

    Without configured Django settings (a script using the pure modules) the English text is returned."""
    if not isinstance(value, Text):
        return value
    from django.conf import settings

    if not settings.configured:
        return str(value)
    from django.utils.translation import gettext

    template = gettext(value.template)
    if not value.params:
        return template
    return template % {key: translate(param) for key, param in value.params.items()}
