"""``kclient-broker`` / ``python -m kclient.broker``: run embedded brokers from a shell.

Runs on the main thread: starts an EmbeddedCluster, prints
``bootstrap.servers=HOST:PORT[,...]`` once every broker listens, optionally prints the
request metrics every ``--metrics-interval`` seconds, and on Ctrl-C / SIGTERM shuts
everything down (threads joined, logs flushed) within 5 seconds.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from kclient.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kclient-broker",
        description="Run a minimal Kafka broker (or a cluster of them) in this process, "
        "for local development and tests.",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="listener of the first broker; broker i uses PORT+i; PORT 0 picks "
        "free ports; a wildcard HOST (0.0.0.0) is advertised as 127.0.0.1 "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--brokers",
        type=int,
        default=1,
        metavar="N",
        help="number of brokers in the cluster (default: %(default)s)",
    )
    p.add_argument(
        "--log-dir",
        default=None,
        metavar="DIR",
        help="keep partition logs in segment files under DIR, recovered on restart "
        "(default: in memory)",
    )
    p.add_argument(
        "--num-partitions",
        type=int,
        default=1,
        metavar="N",
        help="partitions of auto-created topics (num.partitions; default: %(default)s)",
    )
    p.add_argument(
        "--max-partitions-per-topic",
        type=int,
        default=10_000,
        metavar="N",
        help="the most partitions a topic may have, and one CreateTopics request may create "
        "in all (default: %(default)s)",
    )
    p.add_argument(
        "--auto-create-topics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="create unknown topics on Metadata requests (auto.create.topics.enable; default: on)",
    )
    p.add_argument(
        "--num-network-threads",
        type=int,
        default=3,
        metavar="N",
        help="Processor threads per broker (num.network.threads; default: %(default)s)",
    )
    p.add_argument(
        "--num-io-threads",
        type=int,
        default=8,
        metavar="N",
        help="request handler threads per broker (num.io.threads; default: %(default)s)",
    )
    p.add_argument(
        "--message-max-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="largest record batch accepted (message.max.bytes; default: 1048588)",
    )
    p.add_argument(
        "--queued-max-requests",
        type=int,
        default=500,
        metavar="N",
        help="bound of the request queue (queued.max.requests; default: %(default)s)",
    )
    p.add_argument(
        "--socket-request-max-bytes",
        type=int,
        default=100 * 1024 * 1024,
        metavar="BYTES",
        help="largest request accepted (socket.request.max.bytes; default: 100 MiB)",
    )
    p.add_argument(
        "--queued-max-request-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="bytes of requests being read or answered at once, per broker; -1: no bound "
        "(queued.max.request.bytes; default: 100 MiB)",
    )
    p.add_argument(
        "--max-request-items",
        type=int,
        default=None,
        metavar="N",
        help="most array entries (topics, partitions ...) one request may hold in all "
        "(max.request.items; default: 200000)",
    )
    p.add_argument(
        "--fetch-max-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="most bytes one Fetch answer holds (fetch.max.bytes; default: 55 MiB)",
    )
    tls = p.add_argument_group("TLS (Kafka's listeners=SSL://... or SASL_SSL://...)")
    tls.add_argument(
        "--security-protocol",
        default="PLAINTEXT",
        metavar="PROTOCOL",
        help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; clients set the same "
        "security.protocol (default: %(default)s)",
    )
    tls.add_argument(
        "--ssl-keystore-location",
        default=None,
        metavar="FILE",
        help="PEM file with the broker's private key and certificate chain "
        "(ssl.keystore.location; required with SSL and SASL_SSL)",
    )
    tls.add_argument(
        "--ssl-key-password",
        default=None,
        metavar="PASSWORD",
        help="password of an encrypted private key in the keystore (ssl.key.password); "
        "visible to other users of the machine: prefer --ssl-key-password-file or "
        "KCLIENT_BROKER_SSL_KEY_PASSWORD",
    )
    tls.add_argument(
        "--ssl-key-password-file",
        default=None,
        metavar="FILE",
        help="read ssl.key.password from the first line of FILE",
    )
    tls.add_argument(
        "--ssl-truststore-location",
        default=None,
        metavar="FILE",
        help="PEM CA certificates that sign client certificates (and an https "
        "--sasl-oauthbearer-jwks-endpoint-url) (ssl.truststore.location)",
    )
    tls.add_argument(
        "--ssl-client-auth",
        default="none",
        metavar="MODE",
        help="none, requested or required (mutual TLS) (ssl.client.auth; default: %(default)s)",
    )
    sasl = p.add_argument_group("SASL (security.protocol SASL_PLAINTEXT or SASL_SSL)")
    sasl.add_argument(
        "--sasl-enabled-mechanisms",
        default=None,
        metavar="LIST",
        help="comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI "
        "(sasl.enabled.mechanisms; default: the first three; GSSAPI needs a keytab)",
    )
    sasl.add_argument(
        "--sasl-oauthbearer-jwks-endpoint-url",
        default=None,
        metavar="URL",
        help="OAUTHBEARER: accept tokens signed (RS256, ES256) by the keys this JWKS URL "
        "serves (sasl.oauthbearer.jwks.endpoint.url; needs the 'oauth' extra). Without it, "
        "unsigned tokens are accepted (Kafka's unsecured validator: for tests)",
    )
    sasl.add_argument(
        "--sasl-oauthbearer-expected-audience",
        default=None,
        metavar="LIST",
        help="OAUTHBEARER with a JWKS URL: a token's 'aud' must be one of these "
        "(comma-separated; sasl.oauthbearer.expected.audience)",
    )
    sasl.add_argument(
        "--sasl-oauthbearer-expected-issuer",
        default=None,
        metavar="ISSUER",
        help="OAUTHBEARER with a JWKS URL: a token's 'iss' must be this "
        "(sasl.oauthbearer.expected.issuer)",
    )
    sasl.add_argument(
        "--sasl-oauthbearer-required-scope",
        default=None,
        metavar="LIST",
        help="OAUTHBEARER without a JWKS URL: unsigned tokens must carry these scopes "
        "(comma-separated; Kafka's unsecuredValidatorRequiredScope)",
    )
    sasl.add_argument(
        "--sasl-kerberos-keytab",
        default=None,
        metavar="FILE",
        help="GSSAPI: the keytab with the broker's Kerberos key (sasl.kerberos.keytab; "
        "needs the gssapi extra; krb5.conf from KRB5_CONFIG as usual)",
    )
    sasl.add_argument(
        "--sasl-kerberos-principal",
        default=None,
        metavar="PRINCIPAL",
        help="GSSAPI: the broker's principal, e.g. kafka/host@REALM (sasl.kerberos.principal; "
        "default: any key of the service in the keytab)",
    )
    sasl.add_argument(
        "--sasl-kerberos-service-name",
        default=None,
        metavar="NAME",
        help="GSSAPI: the service clients ask for (sasl.kerberos.service.name; default: kafka)",
    )
    sasl.add_argument(
        "--sasl-users-file",
        action="append",
        default=[],
        metavar="FILE",
        help="users who may authenticate: one NAME:PASSWORD per line ('#' comments); "
        "the way to pass passwords (also: the variable KCLIENT_BROKER_SASL_USERS, same lines)",
    )
    sasl.add_argument(
        "--sasl-user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a user who may authenticate (repeat for more). Other local users can read "
        "command lines: for development only (prints a warning)",
    )
    sasl.add_argument(
        "--connections-max-reauth-ms",
        type=int,
        default=None,
        metavar="MS",
        help="lifetime of an authenticated session: clients must re-authenticate (KIP-368) "
        "within it or be disconnected (connections.max.reauth.ms; default: 0, never)",
    )
    sasl.add_argument(
        "--connection-failed-authentication-delay-ms",
        type=int,
        default=None,
        metavar="MS",
        help="hold back the answer to a failed authentication this long, so that guessing "
        "passwords is slow (connection.failed.authentication.delay.ms; default: 100)",
    )
    p.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        default=None,
        metavar="MS",
        help="how long a new consumer group waits for more members before its first "
        "generation (group.initial.rebalance.delay.ms; default: 100, Kafka's is 3000)",
    )
    quotas = p.add_argument_group(
        "client quotas (per client id; unset: unlimited, as in Kafka; AlterClientQuotas "
        "sets them per user and client id at run time)"
    )
    quotas.add_argument(
        "--quota-producer-byte-rate",
        type=int,
        default=None,
        metavar="BYTES",
        help="Produce bytes per second each client id may send; a faster client gets "
        "throttle_time_ms and its connection is muted that long",
    )
    quotas.add_argument(
        "--quota-consumer-byte-rate",
        type=int,
        default=None,
        metavar="BYTES",
        help="Fetch bytes per second each client id may read",
    )
    quotas.add_argument(
        "--quota-request-percentage",
        type=float,
        default=None,
        metavar="PERCENT",
        help="share of one request handler thread's time each client id may take "
        "(100: one whole thread)",
    )
    quotas.add_argument(
        "--quota-controller-mutation-rate",
        type=float,
        default=None,
        metavar="PARTITIONS",
        help="partitions per second each client id may create or delete (KIP-599)",
    )
    quotas.add_argument(
        "--quota-window-num",
        type=int,
        default=None,
        metavar="N",
        help="samples the quota rates are measured over (quota.window.num; default: 11)",
    )
    quotas.add_argument(
        "--quota-window-size-seconds",
        type=int,
        default=None,
        metavar="SECONDS",
        help="length of each sample (quota.window.size.seconds; default: 1)",
    )
    p.add_argument(
        "--transaction-version",
        type=int,
        choices=(1, 2),
        default=None,
        help="the finalized transaction.version feature: 2 (default) serves KIP-890's "
        "transaction version 2 (EndTxn v5, implicit partition adds); 1 serves version 1 only",
    )
    p.add_argument(
        "--transactional-id-expiration-ms",
        type=int,
        default=None,
        metavar="MS",
        help="forget a transactional id with no transaction for MS "
        "(transactional.id.expiration.ms; default: 604800000, 7 days)",
    )
    p.add_argument(
        "--producer-id-expiration-ms",
        type=int,
        default=None,
        metavar="MS",
        help="a partition forgets a producer that has not written to it for MS "
        "(producer.id.expiration.ms; default: 86400000, 1 day)",
    )
    p.add_argument(
        "--metrics-interval",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="print request metrics every SECONDS (default: never)",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default: %(default)s; consumer group joins and rebalances "
        "are logged at INFO unless this is ERROR)",
    )
    return p


#: loggers of the group coordinator, at INFO by default
GROUP_EVENT_LOGGERS = ("kclient.broker.group_coordinator", "kclient.broker.group_rebalance")


def _warn(message: str) -> None:
    print(f"kclient-broker: WARNING: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
    )
    if args.log_level != "ERROR":
        # one line per join, rebalance and generation: what a user watches a group by
        for name in GROUP_EVENT_LOGGERS:
            logging.getLogger(name).setLevel(
                logging.DEBUG if args.log_level == "DEBUG" else logging.INFO
            )
    from kclient.broker.cluster import EmbeddedCluster
    from kclient.broker.config import BrokerConfig, parse_listen
    from kclient.broker.credentials import load_sasl_users, load_ssl_key_password
    from kclient.broker.metadata_store import LogDirError
    from kclient.broker.metrics import format_snapshot

    try:
        host, port = parse_listen(args.listen)
        if args.brokers < 1:
            raise ConfigError(f"--brokers must be at least 1, got {args.brokers}")
        if port and port + args.brokers - 1 > 65535:
            raise ConfigError(f"ports {port}..{port + args.brokers - 1} do not all exist")
        settings: dict[str, Any] = {
            "host": host,
            "port": port,
            "log_dir": args.log_dir,
            "num_partitions": args.num_partitions,
            "max_partitions_per_topic": args.max_partitions_per_topic,
            "auto_create_topics": args.auto_create_topics,
            "num_network_threads": args.num_network_threads,
            "num_io_threads": args.num_io_threads,
            "queued_max_requests": args.queued_max_requests,
            "socket_request_max_bytes": args.socket_request_max_bytes,
            "security_protocol": args.security_protocol,
            "ssl_keystore_location": args.ssl_keystore_location,
            "ssl_key_password": load_ssl_key_password(
                args.ssl_key_password, args.ssl_key_password_file, os.environ, _warn
            ),
            "ssl_truststore_location": args.ssl_truststore_location,
            "ssl_client_auth": args.ssl_client_auth,
        }
        if args.message_max_bytes is not None:
            settings["message_max_bytes"] = args.message_max_bytes
        for name in (
            "queued_max_request_bytes",
            "max_request_items",
            "fetch_max_bytes",
            "group_initial_rebalance_delay_ms",
            "transactional_id_expiration_ms",
            "transaction_version",
            "producer_id_expiration_ms",
            "quota_producer_byte_rate",
            "quota_consumer_byte_rate",
            "quota_request_percentage",
            "quota_controller_mutation_rate",
            "quota_window_num",
            "quota_window_size_seconds",
        ):
            if getattr(args, name) is not None:
                settings[name] = getattr(args, name)
        if args.sasl_enabled_mechanisms is not None:
            settings["sasl_enabled_mechanisms"] = args.sasl_enabled_mechanisms
        for name in (
            "sasl_kerberos_keytab",
            "sasl_kerberos_principal",
            "sasl_kerberos_service_name",
        ):
            if getattr(args, name) is not None:
                settings[name] = getattr(args, name)
        users = load_sasl_users(args.sasl_user, args.sasl_users_file, os.environ, _warn)
        if users:
            settings["sasl_users"] = users
        if args.connections_max_reauth_ms is not None:
            settings["connections_max_reauth_ms"] = args.connections_max_reauth_ms
        for name in (
            "sasl_oauthbearer_jwks_endpoint_url",
            "sasl_oauthbearer_expected_audience",
            "sasl_oauthbearer_expected_issuer",
            "sasl_oauthbearer_required_scope",
        ):
            if getattr(args, name) is not None:
                settings[name] = getattr(args, name)
        if args.connection_failed_authentication_delay_ms is not None:
            settings["connection_failed_authentication_delay_ms"] = (
                args.connection_failed_authentication_delay_ms
            )
        config = BrokerConfig(**settings)
        if args.metrics_interval < 0:
            raise ConfigError("--metrics-interval must be 0 (off) or a positive number")
    except ConfigError as exc:
        print(f"kclient-broker: {exc}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            # reads the PEM files, derives the SCRAM credentials, reads the keytab
            cluster = EmbeddedCluster(args.brokers, config=config)
        except ConfigError as exc:
            print(f"kclient-broker: {exc}", file=sys.stderr)
            return 2
        except LogDirError as exc:
            print(f"kclient-broker: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(
                f"kclient-broker: cannot use --log-dir {args.log_dir}: {exc} "
                "(check that it is a directory this user may write)",
                file=sys.stderr,
            )
            return 1
        try:
            cluster.start()
        except OSError as exc:
            print(
                f"kclient-broker: cannot listen on {args.listen}: {exc.strerror or exc} "
                "(choose another port with --listen HOST:PORT, or PORT 0 for a free one)",
                file=sys.stderr,
            )
            return 1
        try:
            mechanisms = (
                f"sasl.enabled.mechanisms={','.join(config.sasl_enabled_mechanisms)} "
                if config.sasl
                else ""
            )
            if config.connections_max_reauth_ms:
                mechanisms += f"connections.max.reauth.ms={config.connections_max_reauth_ms} "
            print(
                f"kclient-broker: {args.brokers} broker(s) ready; "
                f"security.protocol={cluster.security_protocol} {mechanisms}"
                f"bootstrap.servers={cluster.bootstrap_servers}",
                flush=True,
            )
            interval = args.metrics_interval or None
            while not stop.wait(interval):
                for snap in cluster.metrics():
                    print(format_snapshot(snap), flush=True)
        finally:
            cluster.close(timeout_s=4.0)
        print("kclient-broker: stopped", flush=True)
        return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
