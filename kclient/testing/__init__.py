"""Test doubles and fixtures for kclient and for users testing their own code.

``MockClock`` (time that moves only when told), ``MockSelector`` and ``MockClient``
(scripted network), and a pytest plugin with embedded-broker fixtures.
"""

from kclient.testing.clock import MockClock

__all__ = ["MockClock"]
