"""Constructors that copy a template instance instead of running ``__init__``.

``copier(sample, variable, fallback)``: with the C accelerator built,
``kclient.record._speedups.SlotTemplate`` makes new instances of ``type(sample)`` from
``sample`` (its own ``__init__`` made it), taking the members named in ``variable``
positionally and sharing the rest, which must hold immutable values (else the template
refuses and the fallback is used); without it, ``fallback`` (the class, called with the same
positional arguments). For the objects made once per request on the producer's round trip,
where ``__init__`` is a measurable share of the Python run. No Java counterpart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from kclient.record import _accel

log = logging.getLogger(__name__)

T = TypeVar("T")


def template(
    sample: T,
    variable: tuple[str, ...],
    fresh_lists: tuple[str, ...] = (),
    fresh_locks: tuple[str, ...] = (),
) -> Callable[..., T] | None:
    """``SlotTemplate(sample, variable, fresh_lists, fresh_locks)``, or None without the
    accelerator or when ``sample`` holds a member copies could not share."""
    if not _accel.ACCELERATED:
        return None
    from kclient.record._speedups import SlotTemplate

    try:
        made: Callable[..., T] = SlotTemplate(sample, variable, fresh_lists, fresh_locks)
    except TypeError as exc:  # a member it cannot share: the constructor
        log.debug("%s by its constructor: %s", type(sample).__name__, exc)
        return None
    return made


def copier(sample: T, variable: tuple[str, ...], fallback: Callable[..., T]) -> Callable[..., T]:
    """``make(*values)``: a ``type(sample)`` with ``variable``'s members set to ``values``."""
    return template(sample, variable) or fallback
