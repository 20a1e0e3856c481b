"""Listeners and who is on the other end: TLS, SASL, the SCRAM credential store
(docs/security.md)."""
