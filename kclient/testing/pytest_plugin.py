"""pytest plugin (registered through the ``pytest11`` entry point).

Fixtures that start an embedded broker for tests of code that produces to Kafka.
"""
