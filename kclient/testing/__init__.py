"""Test doubles and fixtures for kclient and for users testing their own code.

``MockClock`` (time that moves only when told), ``MockSelector`` and ``MockClient``
(scripted network), and a pytest plugin with embedded-broker fixtures.
"""

from kclient.testing.client import MockClient, cluster_response, metadata_update_with
from kclient.testing.clock import MockClock
from kclient.testing.selector import MockSelector, SentRequest, api_versions_body

__all__ = [
    "MockClient",
    "MockClock",
    "MockSelector",
    "SentRequest",
    "api_versions_body",
    "cluster_response",
    "metadata_update_with",
]
