"""``odradek mirror``: one cluster's topics copied into another, as seed 002 ("Deployment")
describes multi-datacenter flow -- "the mirror cluster simply acts as a consumer of the source
cluster". Built only on the clients (it imports neither broker nor coordinator):

- ``naming``: which source topics, and the target topic each becomes (``--rename``);
- ``topic_sync``: target topics created and grown to follow the source's;
- ``stream``: one consumer in the mirror's group on the source and one producer on the target,
  passing stored message sets through unchanged (or recompressing, ``--recompress``), and
  committing a source offset only once the target acknowledged everything before it;
- ``waiting``: the sets fetched while their partition's send is unanswered, sent joined;
- ``progress``: the periodic line and the Prometheus metrics;
- ``status``: per source partition, the committed offset against both logs' ends.
"""
