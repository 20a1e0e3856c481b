"""The idempotent producer's numbering (KIP-98): a producer id and epoch from the cluster
(InitProducerId), and per partition the sequence number of the next record.

A batch is numbered when it is first drained for sending, in its partition's queue order, and
keeps its numbers (and its bytes) through every retry: the leader answers a batch it already
wrote with that write's offsets, so a retry after a lost answer writes nothing twice. With one
request per partition in flight, batches are numbered in the order they are written.

What the leader's refusals mean here, as Kafka's producer (before KIP-360) takes them:

- OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH: the batch fails, and the producer
  starts over with a new producer id (``reset``): its later batches are numbered from 0, so
  one gap does not fail everything after it.
- UNKNOWN_PRODUCER_ID: the leader forgot the producer (``producer_id_expiration_ms`` of
  silence); the batch is numbered again under a new producer id and retried.

A batch the leader refused as too large wrote nothing: its partition's numbering goes back to
it (``rewind``) and the halves it is split into are numbered afresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from client.batch import ProducerBatch
from client.network import NetworkClient
from client.producer_ids import ProducerIdAndEpoch, init_producer_id
from client.records import TopicPartition
from protocol.errors import ErrorCode
from protocol.record_batch import NO_SEQUENCE

#: batches of one partition in one request: the leader recognises a retry among its
#: producer's last five batches (Kafka's max.in.flight.requests.per.connection <= 5)
MAX_BATCHES_PER_REQUEST = 5
SEQUENCE_MODULUS = 1 << 31
#: refusals after which the producer numbers anew under a new producer id
RESET_ERRORS = frozenset({
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.UNKNOWN_PRODUCER_ID,
})


class Idempotence:
    """One producer's id, epoch and next sequence per partition."""

    def __init__(self) -> None:
        self.identity: ProducerIdAndEpoch | None = None
        self._next: dict[TopicPartition, int] = {}

    def ensure(self, network: NetworkClient, timeout: float) -> ProducerIdAndEpoch:
        """The producer id and epoch, asked of the cluster the first time (and after a
        ``reset``); raises what ``init_producer_id`` raises."""
        if self.identity is None:
            self.identity = init_producer_id(network, timeout)
            self._next.clear()
        return self.identity

    def number(self, batches: Sequence[ProducerBatch]) -> list[ProducerBatch]:
        """Number the batches drained for one partition that are not numbered yet; returns
        the ones to send together, the rest to be put back: a retried batch goes alone (the
        leader may answer it with its first write's offsets, which new batches do not
        continue), and batches numbered before a ``reset`` go without the ones after it."""
        identity = self.identity
        assert identity is not None, "ensure() first"
        for batch in batches:
            if batch.base_sequence == NO_SEQUENCE and not batch.whole:
                sequence = self._next.get(batch.tp, 0)
                batch.number(identity.producer_id, identity.epoch, sequence)
                self._next[batch.tp] = (sequence + len(batch.records)) % SEQUENCE_MODULUS
        first = batches[0]
        if first.attempts:
            return [first]
        same = 1
        while same < len(batches) and (
            batches[same].producer_id, batches[same].producer_epoch
        ) == (first.producer_id, first.producer_epoch):
            same += 1
        return list(batches[:same])

    def rewind(self, batches: Sequence[ProducerBatch]) -> None:
        """``batches`` (one partition's, in order) were not written: take their numbers back,
        so that what replaces them is numbered from the first of them."""
        identity = self.identity
        numbered = [b for b in batches if b.base_sequence != NO_SEQUENCE]
        if identity is not None and numbered and numbered[0].producer_id == identity.producer_id:
            self._next[numbered[0].tp] = numbered[0].base_sequence
        for batch in numbered:
            batch.unnumber()

    def reset(self) -> None:
        """Start over under a new producer id (asked for at the next send)."""
        self.identity = None
        self._next.clear()
