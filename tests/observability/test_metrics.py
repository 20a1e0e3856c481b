"""The metrics listener: a scrape after known traffic shows exactly that traffic, in the
Prometheus text format (read back with prometheus_client's parser)."""

from __future__ import annotations

import socket
import struct
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.metrics import MAX_CONNECTIONS
from client.group_admin import GroupAdmin
from protocol.apis import ApiKey
from protocol.messageset import Record, encode_message_set
from tests.broker.raw import RawClient, fetch_body
from tests.broker_process import BrokerProcess, BrokerStartError
from tests.coordinator_broker.members import Member, wait_for
from tests.observability.support import (
    Samples,
    labelled,
    metrics_port,
    sample,
    scrape,
    start_with_metrics,
)

pytestmark = pytest.mark.integration


def test_scrape_counts_the_traffic_exactly(make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker)
    sizes = []
    with RawClient(broker.address) as client:
        client.create_topic("t", 2)
        for count in (2, 3, 5):  # 10 messages in 3 produce requests, all to t-0
            message_set = encode_message_set([Record(None, b"v" * 10, 0)] * count)
            sizes.append(len(message_set))
            assert client.produce_set("t", 0, message_set)["error_code"] == 0
        with Member(broker.address, "g", ["t"]) as member:
            member.join()
            member.commit({("t", 0): 4, ("t", 1): 0})
            fetched = client.fetch_partition("t", 0, 0)
            assert fetched["error_code"] == 0

            samples = scrape(url)

            def value(name: str, **labels: str) -> float | None:
                return sample(samples, name, **labels)

            assert value("odradek_requestmetrics_requests_total", request="Produce") == 3
            assert value("odradek_requestmetrics_errors_total", request="Produce",
                         error="NONE") == 3
            assert value("odradek_requestmetrics_requests_total", request="JoinGroup") == 1
            assert value("odradek_requestmetrics_requests_total", request="OffsetCommit") == 1
            assert value("odradek_requestmetrics_totaltime_seconds_count",
                         request="Produce") == 3
            assert value("odradek_requestmetrics_totaltime_seconds_bucket", request="Produce",
                         le="+Inf") == 3
            assert value("odradek_brokertopicmetrics_messagesin_total", topic="t") == 10
            assert value("odradek_brokertopicmetrics_bytesin_total", topic="t") == sum(sizes)
            assert value("odradek_brokertopicmetrics_bytesout_total", topic="t") == sum(sizes)
            assert value("odradek_groupcoordinator_groupcompletedrebalances_total") == 1
            assert value("odradek_groupcoordinator_rebalance_seconds_count") == 1
            assert value("odradek_groupmetadatamanager_numgroups", state="Steady") == 1
            assert value("odradek_groupmetadatamanager_numgroups", state="Empty") == 0
            assert value("odradek_group_members", group="g") == 1
            assert value("odradek_group_generation", group="g") == 1
            assert value("odradek_groupcoordinator_offsetcommits_total") == 2
            assert value("odradek_consumergroup_lag", group="g", topic="t", partition="0") == 6
            assert value("odradek_consumergroup_lag", group="g", topic="t", partition="1") == 0
            assert value("odradek_consumergroup_committed_offset", group="g", topic="t",
                         partition="0") == 4
            assert value("odradek_consumergroup_lag_sum", group="g") == 6
            # the raw client, the member's connection, and none for the scrape itself
            assert value("odradek_socketservermetrics_connection_count") == 2
            assert value("odradek_replicamanager_underreplicatedpartitions") == 0
            assert value("odradek_controller_activecontrollercount") == 1
            assert value("odradek_delayedoperationpurgatory_purgatorysize",
                         delayedoperation="Fetch") == 0

            member.leave()

    def once_empty() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        samples = scrape(url)
        empty = sample(samples, "odradek_groupmetadatamanager_numgroups", state="Empty")
        return samples if empty == 1 else None

    after = wait_for(once_empty, what="group g Empty")
    assert sample(after, "odradek_group_members", group="g") == 0
    assert sample(after, "odradek_consumergroup_lag_sum", group="g") == 6


def test_per_partition_series_can_be_switched_off(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker, url = start_with_metrics(make_broker, metrics_partition_series=False)
    with RawClient(broker.address) as client, Member(broker.address, "g", ["t"]) as member:
        client.create_topic("t", 1)
        client.produce("t", [b"a", b"b", b"c"])
        member.join()
        member.commit({("t", 0): 1})
        samples = scrape(url)
    assert sample(samples, "odradek_consumergroup_lag_sum", group="g") == 2
    assert not [name for name, _ in samples if name.startswith(
        ("odradek_consumergroup_lag", "odradek_consumergroup_committed")) and name != (
        "odradek_consumergroup_lag_sum")]


def test_other_paths_are_not_found(make_broker: Callable[..., BrokerProcess]) -> None:
    _, url = start_with_metrics(make_broker)
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
    assert raised.value.code == 404


def test_no_metrics_listener_by_default(broker: BrokerProcess) -> None:
    assert "metrics.listening" not in broker.log_text()


def test_a_metrics_port_in_use_is_a_clear_start_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = BrokerProcess(tmp_path / "b", settings={"metrics_listener": f"127.0.0.1:{port}"})
        with pytest.raises(BrokerStartError):
            broker.start()
    assert broker.returncode == 1
    assert f"odradek broker: cannot start: metrics_listener 127.0.0.1:{port}: " in (
        broker.log_text())
    assert "Traceback" not in broker.log_text()


def test_log_flushes_are_timed(make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker, flush_messages=1)  # a flush per append
    with RawClient(broker.address) as client:
        client.create_topic("t", 1)
        for _ in range(3):
            client.produce("t", [b"m"])
    samples = scrape(url)
    assert sample(samples, "odradek_logflushstats_logflush_seconds_count") == 3
    assert sample(samples, "odradek_logflushstats_logflush_seconds_bucket", le="+Inf") == 3


def test_purgatories_count_what_waits(make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker)

    def purgatory(operation: str) -> float | None:
        return sample(scrape(url), "odradek_delayedoperationpurgatory_purgatorysize",
                      delayedoperation=operation)

    with RawClient(broker.address) as client, RawClient(broker.address) as poller, \
            Member(broker.address, "g", ["t"]) as first, \
            Member(broker.address, "g", ["t"]) as second:
        client.create_topic("t", 1)
        poller.send(ApiKey.FETCH, fetch_body("t", 0, 0, 1 << 20, 20_000, 1))  # parks
        wait_for(lambda: purgatory("Fetch") == 1, what="the fetch parked")
        first.join()
        second.send_join()  # held until the first member rejoins
        wait_for(lambda: purgatory("Rebalance") == 1, what="the join held")
        client.produce("t", [b"m"])  # answers the fetch
        poller.receive()
        assert purgatory("Fetch") == 0
        first.join()
        second.finish_join()
        assert purgatory("Rebalance") == 0


def test_a_scraper_resetting_its_connection_leaves_the_broker_serving(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker, url = start_with_metrics(make_broker)
    port = metrics_port(broker.log_text())
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=10) as scraper:
        scraper.sendall(b"GET /metr")  # a head cut short, then a reset (RST, not FIN)
        scraper.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    wait_for(lambda: "metrics.connection_broken" in broker.log_text() or not broker.running,
             what="the reset seen by the metrics listener")
    assert broker.running, broker.log_text()
    assert sample(scrape(url), "odradek_controller_activecontrollercount") == 1


def test_a_deleted_topics_and_groups_series_are_removed(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker, url = start_with_metrics(make_broker)
    with RawClient(broker.address) as client:
        for name in ("gone", "kept"):
            client.create_topic(name, 2)
            client.produce(name, [b"m"])
            assert client.fetch(name)
            with Member(broker.address, f"group-{name}", [name]) as member:
                member.join()
                member.commit({(name, 0): 0})
                member.leave()
    before = scrape(url)
    for name in ("gone", "kept"):
        assert sample(before, "odradek_brokertopicmetrics_bytesout_total", topic=name)
        assert sample(before, "odradek_consumergroup_lag", group=f"group-{name}", topic=name,
                      partition="0") == 1
    with GroupAdmin(broker.bootstrap, timeout_ms=10_000) as admin:
        admin.delete_topic("gone")
        assert admin.delete_groups(["group-gone"]) == {"group-gone": None}
    after = scrape(url)
    assert not labelled(after, topic="gone")
    assert not labelled(after, group="group-gone")
    assert sample(after, "odradek_brokertopicmetrics_messagesin_total", topic="kept") == 1
    assert sample(after, "odradek_group_members", group="group-kept") == 0


def test_an_expired_groups_series_are_removed(make_broker: Callable[..., BrokerProcess]) -> None:
    broker, url = start_with_metrics(make_broker, offsets_retention_ms=1000,
                                     offsets_retention_check_interval_ms=100)
    with RawClient(broker.address) as client, Member(broker.address, "g", ["t"]) as member:
        client.create_topic("t", 1)
        member.join()
        member.commit({("t", 0): 0})
        assert labelled(scrape(url), group="g")
        member.leave()

    def expired() -> Samples | None:
        samples = scrape(url)
        return None if labelled(samples, group="g") else samples

    after = wait_for(expired, what="group g expired and its series gone")
    assert sample(after, "odradek_groupmetadatamanager_numgroups", state="Empty") == 0


def test_metrics_connections_beyond_the_cap_are_closed_at_once(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    broker, url = start_with_metrics(make_broker)
    port = metrics_port(broker.log_text())
    assert port is not None
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10)
            for _ in range(MAX_CONNECTIONS + 1)]
    for held in idle:
        held.setblocking(False)  # looked at, never waited on
    try:
        # one of them (whichever the broker took last) is closed with nothing sent, well
        # before the read deadline that ends an idle scraper's connection
        refused = wait_for(lambda: next((s for s in idle if closed(s)), None), timeout=5,
                           what="a metrics connection beyond the cap closed")
        assert "metrics.connection_refused" in broker.log_text()
        for held in idle:
            if held is not refused:
                with pytest.raises(BlockingIOError):  # still open, still waiting for a head
                    held.recv(1)
    finally:
        for held in idle:
            held.close()
    # the held connections gone, a scrape is served again
    assert wait_for(lambda: _scrape_or_none(url), timeout=10, what="a scrape served")


def closed(sock: socket.socket) -> bool:
    """Whether the peer closed the non-blocking ``sock`` having sent nothing."""
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _scrape_or_none(url: str) -> Samples | None:
    try:
        return scrape(url)
    except (urllib.error.URLError, ConnectionError):
        return None
