"""Safety of dangerous tools: the exec policy, its allowlist, and approval requests.

`exec_policy` says whether a command runs, needs approval or is refused; `allowlist` holds the
approved patterns (persisted in the state dir); `approvals` parks calls until someone answers
and routes requests to whoever is talking to the agent; `gate` ties them into the executor.
"""

from nodmix.security.allowlist import Allowlist, Pattern
from nodmix.security.approvals import (
    ApprovalBatch,
    ApprovalBroker,
    ApprovalPresenter,
    ApprovalRequest,
    ApprovalRouter,
    EventPresenter,
)
from nodmix.security.exec_policy import OWNER_CLI, ExecRules, TurnOrigin, decide, resolve_rules
from nodmix.security.gate import ExecGate, TurnHandle, TurnRegistry
from nodmix.tools.base import APPROVAL_WAITING

__all__ = [
    "APPROVAL_WAITING",
    "OWNER_CLI",
    "Allowlist",
    "ApprovalBatch",
    "ApprovalBroker",
    "ApprovalPresenter",
    "ApprovalRequest",
    "ApprovalRouter",
    "EventPresenter",
    "ExecGate",
    "ExecRules",
    "Pattern",
    "TurnHandle",
    "TurnOrigin",
    "TurnRegistry",
    "decide",
    "resolve_rules",
]
