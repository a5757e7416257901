"""Fixtures of the remember review tests."""

import pytest

from tests.review.samples import FILES, OUTPUT


@pytest.fixture
def remember_output():
    return OUTPUT


@pytest.fixture
def remember_files():
    return dict(FILES)
