"""How one Kafka API reaches the handler that serves it: the native API and version it becomes,
and the three translations (request in; response or whole-request error out).

The Kafka listener is a second front door, not a second broker: every Kafka request becomes
the native request of the same meaning and goes to the same handler (``broker.handlers``), and
the native answer is reshaped into the Kafka response of the version asked. Native requests
are built at the native API's highest version, so the answer carries every field any Kafka
version needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.apis import ApiKey

Body = dict[str, Any]

#: Kafka body, Kafka version -> native body
ToNative = Callable[[Body, int], Body]
#: native answer, Kafka request body, Kafka version -> Kafka response body
FromNative = Callable[[Body, Body, int], Body]
#: Kafka request body, Kafka version, error code -> a Kafka response with that error everywhere
# (Kafka's AbstractRequest.getErrorResponse: a handler refused the whole request)
Refusal = Callable[[Body, int, int], Body]


@dataclass(frozen=True)
class Route:
    native: ApiKey
    native_version: int
    request: ToNative
    response: FromNative
    refusal: Refusal
    #: the first Kafka version served by ``newer_native_version`` instead, where a newer
    #: native version means something the older Kafka versions must not get (Fetch: v4 readers
    #: take record batches as stored)
    newer_from: int | None = None
    newer_native_version: int | None = None

    def native_version_for(self, version: int) -> int:
        """The native version a request of this Kafka version becomes."""
        if self.newer_from is not None and self.newer_native_version is not None and (
                version >= self.newer_from):
            return self.newer_native_version
        return self.native_version


def same_body(body: Body, version: int) -> Body:
    """The request translation of an API whose Kafka and native bodies are the same."""
    return body
