"""What an operator sees of a running Nodmix: structured logs, turn records and metrics.

`logs` writes JSON lines to a rotating file in the state dir and reads them back for
`nodmix logs`; `turns` turns run events into log records and metric updates; `metrics` holds
the Prometheus counters and histograms the gateway serves at `/metrics` (imported only by a
process that enables them).
"""

from nodmix.observability.logs import log_file, open_log_file
from nodmix.observability.turns import TurnObserver

__all__ = ["TurnObserver", "log_file", "open_log_file"]
