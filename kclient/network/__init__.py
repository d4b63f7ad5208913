"""The producer's network layer, built like Kafka's ``org.apache.kafka.clients`` package.

``NetworkClient`` (client.py) sends requests to brokers and returns ``ClientResponse``s;
it is owned by one thread (the producer's Sender thread), and only ``wakeup`` may be
called from other threads. Under it: ``KSelector`` (selector.py, socket I/O),
``ClusterConnectionStates`` (connection_states.py), ``InFlightRequests`` (in_flight.py),
``ApiVersions`` (api_versions.py), ``Metadata``/``Cluster`` (metadata.py, cluster.py) and
``DefaultMetadataUpdater`` (metadata_updater.py). ``KafkaClient`` (kafka_client.py) is the
seam the Sender codes against; ``kclient.testing.MockClient`` implements it for tests.
"""

from kclient.network.api_versions import NodeApiVersions
from kclient.network.client import NetworkClient
from kclient.network.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kclient.network.config import NetworkClientConfig, parse_bootstrap_servers
from kclient.network.connection_states import ClusterConnectionStates, ConnectionState
from kclient.network.in_flight import InFlightRequests
from kclient.network.kafka_client import ClientRequest, ClientResponse, KafkaClient
from kclient.network.metadata import Metadata
from kclient.network.selector import KSelector, NetworkReceive, NetworkSend, Selectable

__all__ = [
    "ClientRequest",
    "ClientResponse",
    "Cluster",
    "ClusterConnectionStates",
    "ConnectionState",
    "InFlightRequests",
    "KSelector",
    "KafkaClient",
    "Metadata",
    "NetworkClient",
    "NetworkClientConfig",
    "NetworkReceive",
    "NetworkSend",
    "Node",
    "NodeApiVersions",
    "PartitionInfo",
    "Selectable",
    "TopicPartition",
    "parse_bootstrap_servers",
]
