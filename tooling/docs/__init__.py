"""Generators of docs/ pages that are not owned by one package: docs/protocol.md
(``python -m tooling.docs.protocol``)."""
