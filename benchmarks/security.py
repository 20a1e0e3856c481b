"""What security costs: ``python -m benchmarks.security [--quick]``.

One broker with a PLAINTEXT and a SASL_SSL listener (TLS with a test CA from trustme, SCRAM-
SHA-256 logins). Prints one JSON line per case:

- ``producer``: messages/s and MB/s of one ``Producer`` sending 100-byte values (acks=1,
  ``linger_ms=5``, ``batch_bytes=256 KiB``) over each listener, best of three turns each; the
  SASL_SSL line carries ``ratio``, its rate over PLAINTEXT's;
- ``consumer``: the same for ``Consumer.poll`` reading the topic from the start;
- ``logins``: connections opened and authenticated per second, one after another (TCP
  connect, then the TLS handshake and/or the SASL exchange, then one ApiVersions), for SSL,
  SASL_PLAINTEXT and SASL_SSL with SCRAM-SHA-256 and PLAIN -- client and broker costs both
  (a SCRAM login derives the salted password on the client: 4,096 PBKDF2 rounds; a PLAIN one
  on the broker);
- ``failed_logins``: what a flood of failed logins costs an authenticated producer. One
  ``Producer`` (SASL_PLAINTEXT, SCRAM-SHA-256, acks=1) sends rounds of 200 100-byte messages,
  each flushed: the median round alone (``alone_median_ms``) and while another process fails
  1,000 PLAIN logins with wrong passwords, 25 at a time (``attacked_median_ms``; each one a
  PBKDF2 on the broker, and the answer held back by
  ``connection_failed_authentication_delay_ms`` where the broker has it). ``ratio`` is the
  producer's speed under the flood over its speed alone (1.0: no cost); ``failed_logins_per_s``
  how fast the broker refused them.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trustme

from benchmarks.codec import emit
from benchmarks.servers import stop_process
from benchmarks.throughput import VALUE_BYTES, new_topic, values
from benchmarks.throughput import consume as read_from_start
from client import Admin, Producer
from client.network import NetworkClient
from client.security import SecurityConfig
from protocol.apis import ApiKey

USER, PASSWORD = "bench", "bench-password"
ROUNDS = 3
FAILED_LOGINS = 1000
ATTACKERS = 25  # failed logins in flight at once
ROUND_MESSAGES = 200
CASES = ("producer", "consumer", "logins", "failed_logins")
LOGIN_CASES = (("SSL", None), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "PLAIN"),
               ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN"))
REPO_ROOT = Path(__file__).resolve().parents[1]
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LISTENER = re.compile(r"odradek broker \d+ listener (\S+) on (\S+:\d+)")


@contextmanager
def secured_broker(timeout: float = 30.0) -> Iterator[tuple[dict[str, str], Path]]:
    """A broker with every listener on a free port: (address by listener, the CA file)."""
    with tempfile.TemporaryDirectory(prefix="odradek-bench-security-") as name:
        tmp = Path(name)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(tmp / "server.pem"))
        listeners = ",".join(f"{n}://127.0.0.1:0" for n in LISTENERS)
        (tmp / "odradek.toml").write_text(
            f'listeners = "{listeners}"\nssl_certfile = "{tmp / "server.pem"}"\n'
            f'ssl_keyfile = "{tmp / "server.pem"}"\n')
        with open(tmp / "broker.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "broker", "start", "--data-dir", str(tmp / "data"),
                 "--config", str(tmp / "odradek.toml")],
                stdout=subprocess.PIPE, stderr=log, text=True)
            try:
                yield _addresses(proc, timeout), tmp / "ca.pem"
            finally:
                stop_process(proc)


def _addresses(proc: subprocess.Popen[str], timeout: float) -> dict[str, str]:
    assert proc.stdout is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while len(found) < len(LISTENERS) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = _LISTENER.search(line)
        if match:
            found[match[1]] = match[2]
    if len(found) < len(LISTENERS):
        proc.kill()
        raise SystemExit(f"broker did not announce its listeners: {found}")
    return found


def security(listener: str, ca: Path, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
    options: dict[str, Any] = {"security_protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        options["ssl_cafile"] = str(ca)
    if listener.startswith("SASL_"):
        options.update(sasl_mechanism=mechanism, sasl_plain_username=USER,
                       sasl_plain_password=PASSWORD)
    return options


def produce(bootstrap: str, options: dict[str, Any], topic: str, n: int) -> float:
    samples = values()
    with Producer(bootstrap, acks=1, linger_ms=5, batch_bytes=256 * 1024,
                  buffer_bytes=64 * 1024 * 1024, **options) as producer:
        producer.send(topic, samples[0]).result(30)
        send = producer.send
        start = time.perf_counter()
        for i in range(n - 1):
            send(topic, samples[i % len(samples)])
        producer.flush()
        return time.perf_counter() - start


def consume(bootstrap: str, options: dict[str, Any], topic: str, n: int) -> float:
    """``throughput.consume`` with a listener's settings, in ``produce``'s shape."""
    return read_from_start(bootstrap, topic, n, **options)


def logins_per_s(bootstrap: str, options: dict[str, Any], seconds: float) -> float:
    config = SecurityConfig(**options)
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        network = NetworkClient(bootstrap, security=config)
        try:
            network.send(-1, ApiKey.API_VERSIONS, {}).result(10)
        finally:
            network.close()
        count += 1
    return count / (time.perf_counter() - start)


#: ``python -c _ATTACKER HOST PORT COUNT ATTACKERS``: COUNT PLAIN logins with wrong passwords,
#: ATTACKERS at once, each read to the broker's close; "attacking" once the first has ended.
_ATTACKER = """
import socket, sys, threading
from protocol.apis import ApiKey
from protocol.wire import encode_request
host, port, count, attackers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
guesses = iter(range(count))
lock = threading.Lock()
started = []

def attack():
    while True:
        with lock:
            guess = next(guesses, None)
        if guess is None:
            return
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 0, 1, "attacker",
                                        {"mechanism": "PLAIN"}))
            sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 0, 2, "attacker",
                                        {"auth_bytes": b"\\0bench\\0guess%d" % guess}))
            while sock.recv(65536):
                pass
        with lock:
            if not started:
                started.append(True)
                print("attacking", flush=True)

threads = [threading.Thread(target=attack) for _ in range(attackers)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def produce_round(producer: Producer, topic: str) -> float:
    """Seconds to have ROUND_MESSAGES 100-byte messages acknowledged."""
    payload = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for _ in range(ROUND_MESSAGES):
        producer.send(topic, payload)
    producer.flush(60)
    return time.perf_counter() - start


def failed_logins(address: str, ca: Path, topic: str, count: int) -> dict[str, Any]:
    """The producer's round alone and during ``count`` failed logins (another process: the
    attacker is a client elsewhere, not a thread sharing the producer's GIL)."""
    host, port = address.rsplit(":", 1)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with Producer(address, acks=1, **security("SASL_PLAINTEXT", ca)) as producer:
        for _ in range(3):
            produce_round(producer, topic)  # logged in, warmed up
        alone = statistics.median(produce_round(producer, topic) for _ in range(15))
        started = time.perf_counter()
        attacker = subprocess.Popen(
            [sys.executable, "-c", _ATTACKER, host, port, str(count), str(ATTACKERS)],
            stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert attacker.stdout is not None
            if not select.select([attacker.stdout], [], [], 60)[0]:
                raise SystemExit("failed logins: no answer from the broker within 60 s")
            attacker.stdout.readline()
            during: list[float] = []
            while attacker.poll() is None:
                spent = produce_round(producer, topic)
                if attacker.poll() is None:  # the flood was on all along
                    during.append(spent)
            if attacker.wait(60) != 0:
                raise SystemExit(f"failed logins: the attacker exited {attacker.returncode}")
            attack_s = time.perf_counter() - started
        finally:
            if attacker.poll() is None:
                attacker.kill()
                attacker.wait(10)
    alone_ms = round(alone * 1000, 2)
    # the ratio of the medians as printed, so a reader gets the same figure from the line
    attacked_ms = round(statistics.median(during) * 1000, 2) if during else None
    return {"bench": "failed_logins", "security_protocol": "SASL_PLAINTEXT",
            "mechanism": "PLAIN", "logins": count, "in_flight": ATTACKERS,
            "round_messages": ROUND_MESSAGES, "value_bytes": VALUE_BYTES,
            "alone_median_ms": alone_ms,
            "attacked_median_ms": attacked_ms,
            "ratio": round(alone_ms / attacked_ms, 2) if attacked_ms else None,
            "failed_logins_per_s": round(count / attack_s, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.security", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="which cases, comma-separated (default: %(default)s)")
    parser.add_argument("--failed-logins", type=int, default=FAILED_LOGINS,
                        help="failed logins of the failed_logins case (default: %(default)s)")
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}: choose from {', '.join(CASES)}")
    n = 20_000 if args.quick else 300_000
    login_seconds = 1.0 if args.quick else 5.0
    with secured_broker() as (addresses, ca):
        plain = addresses["PLAINTEXT"]
        with Admin(plain) as admin:
            admin.upsert_user_scram_credential(USER, "SCRAM-SHA-256", PASSWORD)
            topics = {name: new_topic(admin, f"security-{name.lower()}")
                      for name in ("PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT")}
        rates: dict[str, dict[str, float]] = {"producer": {}, "consumer": {}}
        for case, run in (("producer", produce), ("consumer", consume)):
            if case not in cases:
                continue
            # the two listeners take turns, best of ROUNDS each: a busy moment of a shared
            # machine should not decide the ratio
            for _ in range(ROUNDS):
                for listener in ("PLAINTEXT", "SASL_SSL"):
                    seconds = run(addresses[listener], security(listener, ca),
                                  topics[listener], n)
                    rates[case][listener] = max(rates[case].get(listener, 0.0), n / seconds)
            for listener in ("PLAINTEXT", "SASL_SSL"):
                rate = rates[case][listener]
                line: dict[str, Any] = {
                    "bench": case, "security_protocol": listener, "messages": n, "rounds": ROUNDS,
                    "value_bytes": VALUE_BYTES, "msgs_per_s": round(rate),
                    "mb_per_s": round(rate * VALUE_BYTES / 1e6, 1)}
                if listener != "PLAINTEXT":
                    line["ratio"] = round(rate / rates[case]["PLAINTEXT"], 2)
                emit(line)
        if "logins" in cases:
            for listener, mechanism in LOGIN_CASES:
                options = security(listener, ca, mechanism or "PLAIN")
                emit({"bench": "logins", "security_protocol": listener,
                      "mechanism": mechanism or "-",
                      "logins_per_s": round(logins_per_s(addresses[listener], options,
                                                         login_seconds), 1)})
        if "failed_logins" in cases:
            emit(failed_logins(addresses["SASL_PLAINTEXT"], ca, topics["SASL_PLAINTEXT"],
                               args.failed_logins))


if __name__ == "__main__":
    main()
