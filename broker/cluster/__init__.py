"""The cluster: which brokers are live, where replicas go, and who leads each partition."""
