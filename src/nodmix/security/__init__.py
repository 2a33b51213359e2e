"""Safe by default: exec approvals, the sandboxed shell and the security audit."""
