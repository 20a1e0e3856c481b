"""What to do when messages a read planned on are gone (retention, a deleted topic).

Spark's Kafka source rule, kept as is: with ``failOnDataLoss`` (the default) the query fails
with a message saying what was lost; without it the loss is logged and reading goes on.
"""

from __future__ import annotations

import logging

log = logging.getLogger("odradek.pipeline")


class DataLossError(RuntimeError):
    """Messages a read planned on no longer exist and ``failOnDataLoss`` is true."""


def report_data_loss(message: str, *, fail: bool) -> None:
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost; set the option failOnDataLoss to false "
            "to carry on regardless."
        )
    log.warning("%s; carrying on (failOnDataLoss is false)", message)
