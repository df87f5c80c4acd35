"""Record names shared by every ServerApp/ClientApp message of this package.

A train reply carries ``ARRAYS`` (the uploaded parameters) and ``METRICS`` (with
``NUM_EXAMPLES`` and ``PARTITION_ID``); methods add records of their own under other keys.
"""

ARRAYS = "arrays"
METRICS = "metrics"
CONFIG = "config"
PARTITION_ID = "partition-id"
NUM_EXAMPLES = "num-examples"
SERVER_ROUND = "server-round"
NUM_LOCAL = "num-local"  # all of a client's nodes/graphs: the client-size weight
