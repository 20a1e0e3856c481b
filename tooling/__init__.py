"""What is not the client library: the ``odradek`` command (tooling.cli), the web console
(tooling.console), the local ZooKeeper/broker supervisor and the demo (tooling.local) and the
generator of docs/protocol.md (tooling.docs).

It sits above every other package and may import any of them (the CLI's ``users`` commands write
credentials through the broker's own stores); nothing imports it back -- the client library in
particular stays free of it (tests/test_layering.py)."""
