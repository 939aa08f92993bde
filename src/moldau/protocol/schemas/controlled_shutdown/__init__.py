"""ControlledShutdown (api key 7), versions 1 to 3, in kio's form (see the parent package).

Kafka 3.9's ``ControlledShutdownRequest``: the broker's id, and from v2 its broker epoch
(the czxid of its registration; -1 skips the check); v3 is the flexible version. The response
is a top-level error code and the partitions the broker still leads. Version 0 is left out:
its request header has no client id, unlike every other request.
"""
