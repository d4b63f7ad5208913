"""The producer's caller side: ``KafkaProducer`` (``kafka_producer.py``) and the parts it
is made of, each a base class holding one concern: ``send_batch`` (``send_batch.py``),
the transaction methods (``transactions.py``) and the wait for a topic's metadata
(``metadata_wait.py``); ``record_args.py`` checks ``send``'s arguments and
``interceptors.py`` runs the ``interceptors`` setting's objects (Java's
``ProducerInterceptors``). What they drive —
the accumulator, the Sender thread, the futures — is in :mod:`kclient.sender`.

``from kclient.producer import KafkaProducer`` (or ``from kclient import KafkaProducer``).
"""

from kclient.producer.kafka_producer import KafkaProducer

__all__ = ["KafkaProducer"]
