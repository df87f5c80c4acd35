"""Record names shared by every ServerApp/ClientApp message of this package.

A train reply carries ``ARRAYS`` (the uploaded parameters) and ``METRICS`` (with
``NUM_EXAMPLES`` and ``PARTITION_ID``); methods add records of their own under other keys.
With fused evaluation a train message also asks for the evaluation of the arrays it
carries (``EVALUATE_ROUND``), which comes back as the reply's ``EVALUATION`` record.
"""

ARRAYS = "arrays"
METRICS = "metrics"
CONFIG = "config"
PARTITION_ID = "partition-id"
NUM_EXAMPLES = "num-examples"
SERVER_ROUND = "server-round"
NUM_LOCAL = "num-local"  # all of a client's nodes/graphs: the client-size weight
NUM_PARTITIONS = "num-partitions"

#: Config key of a ``train`` message: first evaluate the received arrays as the global
#: model of this (earlier) round, and put the metrics into the reply's :data:`EVALUATION`.
EVALUATE_ROUND = "evaluate-round"
#: Record of a train reply holding that evaluation (a MetricRecord like ``metrics``).
EVALUATION = "evaluation"
#: ``query.<action>`` every ClientApp answers with its ``partition-id`` and
#: ``num-partitions``, without building a client (the server's node -> partition map).
PARTITION_QUERY = "partition"
#: Config key of every message of a resumed run: the server round it resumed after; a
#: client whose state is not restored yet loads its checkpoint of that round first.
RESUME_ROUND = "resume-round"
#: Record of a train reply in a round whose message carried no global arrays (round 1: the
#: client built the start model from the run seed), where the server needs that start model
#: :math:`w_0` (FedNova's normalized update; DP's bound and zero update): the client's copy of
#: it, which the server takes from a strict majority of the replies.
START = "start"
#: Prefix of the resource metrics (``res.params``, ``res.shared-params``, ``res.flops``)
#: that a client's first train reply of a run carries.
RESOURCES = "res."
