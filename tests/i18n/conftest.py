"""The i18n tests read pages in Chinese; the test client leaves the last request's language active in the thread,
so each test ends by going back to the default (the tests run after these expect English messages)."""

import pytest
from django.utils import translation


@pytest.fixture(autouse=True)
def _default_language_afterwards():
    yield
    translation.deactivate()
