"""Authorization and quotas: who may do what (ACLs), and how fast (byte-rate quotas)."""
