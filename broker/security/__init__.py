"""Security: who is on the other end (listeners, TLS, SASL, the SCRAM credential store) and what
they may do (ACLs) and how fast (byte-rate quotas). See docs/security.md."""
