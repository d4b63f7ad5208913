"""Builds kclient's optional C accelerator; everything else is in pyproject.toml.

``pip install`` (``-e`` too) compiles ``kclient/record/_speedups.c`` (with
``_column.c``, the Arrow columns ``send_batch`` reads in place, ``_append.c`` and
``_send.c``, the per-record append of the accumulator and of ``send``, ``_lock.c``, and
``_template.c`` and ``_open.c``, the new batches copied from templates and opened by
``send``),
``kclient/record/_validate.c`` (the broker's record checks) and
``kclient/sender/_murmur2.c`` next to them, and ``kclient/aio/_future.c`` with ``_settle.c``
and ``_future_module.c`` (kclient.aio's record future and its per-batch settle), and
``kclient/protocol/_produce.c`` with ``_produce_answer.c`` (the one-partition ProduceRequest
and its answer, see ``produce_fast``), ``kclient/sender/_stats.c`` (the producer metrics' ``SampledStat`` and the
Sender's recording), ``kclient/_clock.c`` (the system clock's ``monotonic_ms``),
``kclient/sender/_step.c`` with ``_step_request.c`` and ``_step_run.c`` (the Sender's step),
``kclient/sender/_complete.c`` with ``_complete_batch.c``, ``_complete_config.c`` and ``_complete_locked.c`` (a
Produce answer's common case, see ``produce_responses.py``, and the buffer pool's,
incomplete batches' and produce result's small locked methods),
``kclient/network/_channel.c`` with ``_send.c`` (the network channel's ``NetworkSend``,
``NetworkReceive`` and plain-TCP reads and writes; ``_selector.c``, the selector's ``poll``,
``send`` and ``is_channel_ready`` and the event loop's ``select``), ``kclient/network/_client.c``
with ``_client_send.c`` (the network client's common-case answers, and its sends) and
``kclient/sender/_drain.c`` with ``_drain_ready.c``, ``_drain_walk.c`` and ``_drain_build.c``
(the accumulator's ``ready`` and ``drain``, see ``sender/drain.py``). It is
``optional``: without a C compiler or the Python headers the build prints a warning and
kclient installs without it, running its pure-Python record code instead. After editing
the C file, rebuild it in place with ``.venv/bin/python setup.py build_ext --inplace``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kclient.record._speedups",
            [
                "kclient/record/_speedups.c",
                "kclient/record/_column.c",
                "kclient/record/_append.c",
                "kclient/record/_lock.c",
                "kclient/record/_send.c",
                "kclient/record/_template.c",
                "kclient/record/_open.c",
                "kclient/record/_crc32c.c",
            ],
            depends=[
                "kclient/record/_column.h",
                "kclient/record/_writer.h",
                "kclient/record/_lock.h",
                "kclient/record/_append.h",
                "kclient/record/_template.h",
                "kclient/record/_crc32c.h",
                "kclient/_slots.h",
                "kclient/_fallback_method.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.record._validate",
            ["kclient/record/_validate.c"],
            optional=True,
        ),
        Extension(
            "kclient.sender._murmur2",
            ["kclient/sender/_murmur2.c"],
            depends=["kclient/record/_column.h"],
            optional=True,
        ),
        Extension(
            "kclient.aio._future",
            [
                "kclient/aio/_future.c",
                "kclient/aio/_settle.c",
                "kclient/aio/_future_module.c",
            ],
            depends=["kclient/aio/_future.h"],
            optional=True,
        ),
        Extension(
            "kclient.protocol._produce",
            ["kclient/protocol/_produce.c", "kclient/protocol/_produce_answer.c"],
            depends=["kclient/protocol/_produce.h"],
            optional=True,
        ),
        Extension("kclient._clock", ["kclient/_clock.c"], optional=True),
        Extension(
            "kclient.sender._step",
            [
                "kclient/sender/_step.c",
                "kclient/sender/_step_request.c",
                "kclient/sender/_step_run.c",
            ],
            depends=[
                "kclient/sender/_step.h",
                "kclient/_pycall.h",
                "kclient/_slots.h",
                "kclient/_fallback_method.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.sender._stats",
            ["kclient/sender/_stats.c"],
            optional=True,
        ),
        Extension(
            "kclient.sender._complete",
            [
                "kclient/sender/_complete.c",
                "kclient/sender/_complete_batch.c",
                "kclient/sender/_complete_config.c",
                "kclient/sender/_complete_locked.c",
            ],
            depends=[
                "kclient/sender/_complete.h",
                "kclient/_slots.h",
                "kclient/_pycall.h",
                "kclient/_fallback_method.h",
                "kclient/record/_lock.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.network._channel",
            [
                "kclient/network/_channel.c",
                "kclient/network/_send.c",
                "kclient/network/_selector.c",
                "kclient/network/_selector_util.c",
                "kclient/network/_loop_select.c",
            ],
            depends=[
                "kclient/network/_channel.h",
                "kclient/network/_send.h",
                "kclient/network/_selector.h",
                "kclient/_fallback_method.h",
                "kclient/_pycall.h",
                "kclient/_slots.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.network._client",
            [
                "kclient/network/_client.c",
                "kclient/network/_client_send.c",
                "kclient/network/_client_ready.c",
                "kclient/network/_client_poll.c",
                "kclient/network/_client_poll_io.c",
            ],
            depends=[
                "kclient/network/_client.h",
                "kclient/network/_send.h",
                "kclient/_fallback_method.h",
                "kclient/_pycall.h",
                "kclient/_slots.h",
            ],
            optional=True,
        ),
        Extension(
            "kclient.sender._drain",
            [
                "kclient/sender/_drain.c",
                "kclient/sender/_drain_ready.c",
                "kclient/sender/_drain_walk.c",
                "kclient/sender/_drain_build.c",
            ],
            depends=[
                "kclient/sender/_drain.h",
                "kclient/_slots.h",
                "kclient/record/_lock.h",
                "kclient/record/_writer.h",
            ],
            optional=True,
        ),
    ]
)
