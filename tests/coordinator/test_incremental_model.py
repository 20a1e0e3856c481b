"""A model-based test of incremental rounds: clients that keep fetching while they rejoin, under
random joins, leaves, crashes, heartbeats, commits, consumption, topic growth, failed writes and
coordinator failovers (with writes in flight that did or did not reach the log).

Each modelled client behaves as ``client.Consumer`` does with ``rebalance_protocol=
"incremental"`` (a few are eager, as old clients in the same group): it names what it holds in
each JoinGroup; on an answer it commits what it consumed of the partitions left out, lets go of
them and rejoins; new partitions start at their committed offsets. A client never sends a
request while its commit is unanswered (the broker reads one request per connection at a time).
Clients are never slow: time only passes after every live client has reacted, as KIP-848's
guarantee assumes; a crashed client owns nothing from the moment it dies.

After every step: no partition is held by two live clients (revoke, then assign), and no
partition's committed offset ever goes backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, answered_write, make_config, owned

E = ErrorCode
GROUP = "g"
TOPICS = ["a", "b"]
TP = tuple[str, int]
#: answers after which a client simply rejoins with what it holds
RETRY = {E.REBALANCE_IN_PROGRESS, E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE,
         E.COORDINATOR_LOAD_IN_PROGRESS}


@dataclass
class Client:
    member: Consumer
    positions: dict[TP, int] = field(default_factory=dict)  # what it holds, and where it is
    commit: int | None = None  # the token of its unanswered commit
    then_rejoin: bool = False  # it lets go of partitions: rejoin once the commit is answered

    @property
    def busy(self) -> bool:
        return self.member.pending is not None or self.commit is not None


class IncrementalModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.driver = FakeDriver(
            make_config(group_initial_rebalance_delay_ms=0, offsets_topic_partitions=2),
            {"a": 3, "b": 2}, auto_ack=False,
        )
        self.clients: list[Client] = []
        self.connections = 0
        self.highest: dict[TP, int] = {}

    # ------------------------------------------------------------------------------ helpers

    def _pick(self, index: int) -> Client:
        return self.clients[index % len(self.clients)]

    def _committed(self, tp: TP) -> int:
        group = self.driver.coordinator.group(GROUP)
        value = None if group is None else group.offsets.get(tp)  # type: ignore[call-overload]
        return 0 if value is None else value.offset

    def _send_commit(self, client: Client, tps: list[TP]) -> None:
        offsets = {tp: client.positions[tp] for tp in tps}
        if not offsets or not client.member.member_id:
            return
        client.commit = self.driver.commit(GROUP, client.member.generation,
                                           client.member.member_id, offsets)

    def _join(self, client: Client) -> None:
        member = client.member
        if not member.incremental:  # an eager client lets go of everything first
            client.positions.clear()
        member.partitions = set(client.positions)
        member.join()

    def _lose_everything(self, client: Client) -> None:
        client.positions.clear()
        client.member.member_id, client.member.generation = "", -1

    def _on_join_answer(self, client: Client, answer: dict[str, Any]) -> None:
        member = client.member
        member.pending = None
        code = E(answer["error_code"])
        if code is E.UNKNOWN_MEMBER_ID:
            self._lose_everything(client)
            self._join(client)
            return
        if code is not E.NONE:
            assert code in RETRY, code
            self._join(client)
            return
        member.member_id, member.generation = answer["member_id"], answer["generation_id"]
        given = owned(answer["partitions_to_own"])
        lost = [tp for tp in client.positions if tp not in given]
        for tp in given - set(client.positions):
            client.positions[tp] = self._committed(tp)
        if lost:
            self._send_commit(client, lost)
            for tp in lost:
                del client.positions[tp]
            client.then_rejoin = True
            if client.commit is None:
                client.then_rejoin = False
                self._join(client)

    def _settle(self, clients: list[Client] | None = None) -> None:
        """Clients (all by default) read what has come in, and act on it: the newest first,
        so a newcomer acts on its answer before the members that hold what it is meant to get
        have read theirs."""
        progress = True
        while progress:
            progress = False
            for client in reversed(self.clients if clients is None else clients):
                member = client.member
                if client.commit is not None:
                    answer = self.driver.answer(client.commit)
                    if answer is None:
                        continue
                    client.commit, progress = None, True
                    codes = {E(p["error_code"]) for t in answer["topics"]
                             for p in t["partitions"]}
                    if E.UNKNOWN_MEMBER_ID in codes:
                        self._lose_everything(client)
                        client.then_rejoin = True
                if client.then_rejoin and not client.busy:
                    client.then_rejoin, progress = False, True
                    self._join(client)
                if member.pending is not None:
                    answer = self.driver.answer(member.pending)
                    if answer is not None:
                        progress = True
                        self._on_join_answer(client, answer)
                        self.no_partition_has_two_owners()  # at every moment, not per step

    def _heartbeat(self, client: Client) -> None:
        member = client.member
        if client.busy or client.then_rejoin or not member.member_id:
            return
        code = member.heartbeat()
        if code in (E.NONE, E.COORDINATOR_LOAD_IN_PROGRESS):
            return
        if code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._lose_everything(client)
        self._join(client)

    # -------------------------------------------------------------------------------- rules

    @rule(eager=st.sampled_from([False, False, False, True]))
    def new_client(self, eager: bool) -> None:
        self.connections += 1
        member = Consumer(self.driver, GROUP, list(TOPICS), strategy="sticky",
                          connection=f"conn-{self.connections}", incremental=not eager)
        client = Client(member)
        self.clients.append(client)
        self._join(client)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50))
    def react(self, index: int) -> None:
        """One client reads its answers (the others, not yet: clients act at their own pace)."""
        self._settle([self._pick(index)])

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50), count=st.integers(1, 5))
    def consume(self, index: int, count: int) -> None:
        client = self._pick(index)
        for tp in client.positions:
            client.positions[tp] += count

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50))
    def commit(self, index: int) -> None:
        client = self._pick(index)
        if not client.busy and not client.then_rejoin:
            self._send_commit(client, sorted(client.positions))

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50))
    def heartbeat(self, index: int) -> None:
        self._heartbeat(self._pick(index))

    @precondition(lambda self: self.clients)
    @rule()
    def everyone_heartbeats(self) -> None:
        """Each client heartbeats (and rejoins if told to), reading no answer yet."""
        for client in list(self.clients):
            self._heartbeat(client)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50))
    def leave(self, index: int) -> None:
        """A clean close: commit, let go of everything, LeaveGroup."""
        client = self._pick(index)
        if client.busy or client.then_rejoin or not client.member.member_id:
            return
        self._send_commit(client, sorted(client.positions))
        if client.commit is not None:
            self.driver.ack()
            self._settle()
        client.positions.clear()
        client.member.leave()
        self.clients.remove(client)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 50))
    def crash(self, index: int) -> None:
        """kill -9: the process and what it held are gone; the coordinator finds out from
        the session timeout."""
        self.clients.remove(self._pick(index))

    @rule(ms=st.sampled_from([300, 1_000, 2_500]))
    def time_passes(self, ms: int) -> None:
        """Every live client reacts and heartbeats first: nobody is slow."""
        self.driver.ack()
        self._settle()
        for client in list(self.clients):
            self._heartbeat(client)
        self.driver.ack()
        self._settle()
        self.driver.advance(ms)

    @rule(count=st.integers(1, 3))
    def ack(self, count: int) -> None:
        self.driver.ack(count=count)

    @precondition(lambda self: any(map(answered_write, self.driver.in_flight)))
    @rule()
    def fail_one_write(self) -> None:
        append = next(filter(answered_write, self.driver.in_flight))
        self.driver.finish(append, E.NOT_LEADER_FOR_PARTITION)

    @rule(topic=st.sampled_from(TOPICS))
    def add_partition(self, topic: str) -> None:
        count = self.driver.topics[topic] + 1
        self.driver.topics[topic] = count
        self.driver.apply(self.driver.coordinator.on_topic_partitions_changed(
            topic, count, self.driver.now))

    @rule(written=st.booleans())
    def coordinator_fails_over(self, written: bool) -> None:
        """The offsets partition moves: writes in flight may or may not have reached the log;
        held requests are answered NOT_COORDINATOR."""
        self.driver.reload(self.driver.partition_of(GROUP), in_flight_written=written)

    # ---------------------------------------------------------------------------- invariants

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        holders: dict[TP, int] = {}
        for i, client in enumerate(self.clients):
            for tp in client.positions:
                assert tp not in holders, f"{tp} held by clients {holders[tp]} and {i}"
                holders[tp] = i

    @invariant()
    def commits_never_go_backwards(self) -> None:
        group = self.driver.coordinator.group(GROUP)
        if group is None:
            return
        for tp, value in group.offsets.items():
            key = (tp.topic, tp.partition)
            assert value.offset >= self.highest.get(key, 0), (tp, value.offset)
            self.highest[key] = value.offset


IncrementalModel.TestCase.settings = settings(stateful_step_count=80, max_examples=300,
                                              deadline=None)
test_incremental_model = IncrementalModel.TestCase
