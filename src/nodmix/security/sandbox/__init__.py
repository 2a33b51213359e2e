"""The sandboxed shell: which sessions are sandboxed, and bubblewrap to run their commands."""
