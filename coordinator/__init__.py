"""The group coordinator as deterministic logic: no sockets, no trio, no wall clock.

Group and offsets-partition state machines, assignment strategies, the offset cache and the
records written to ``__consumer_offsets``. Time comes in as an argument; effects go out as values.
"""
