"""Built-in respond functions for the scripted model server (and `FunctionProvider`).

Run one with `python -m nodmix.testing.model_server --script <name>`:

- `echo`: answers with the text of the last user message. The simplest way to check that
  Nodmix, its config and a provider adapter are wired up, without a paid API key.
- `tool-then-answer`: if the last user message asks to read or list something, calls the
  matching tool once (a tool named in the message, else a `read`/`list`-like tool the
  request offers) with the path from the message, then answers with the tool result's
  text. Otherwise it behaves like `echo`. Exercises a full tool round trip.
- `code-mode`: with `tools.codeMode` on, answers by writing an `exec` program that finds and
  calls tools with `tools.search`/`tools.call` ("read notes.txt" reads the file), follows
  `waiting` with `wait`, and answers with the program's value.
- `hang`: opens the event stream, then sends nothing more (tries the idle timeout).
- `trickle`: opens the event stream, then sends only keep-alive comments and blank lines,
  forever (keep-alives do not count as progress, so the idle timeout still ends it).
- `memory-search`: asks `memory_search` the user's message and answers with the hits
  (`path:start-end (score)` lines and the best snippet); with `/v1/embeddings` on the same
  server, hybrid memory search can be tried end to end without a key.
- `web-task`: "search <query> and send the form as <name>": `web_search`, then the browser
  opens the first result, types the name into its form, clicks its button and the answer is
  what the page then says; in code mode one `exec` program does the same.
- `subagents`: delegates with `sessions_spawn` ("spawn wait: a | b", "spawn: a", "fanout 20"
  in code mode), `sessions_send`, `sessions_list`, `sessions_history` and `agents_list`, and
  answers any other message as a subagent would ("done: <task>"; "sleep 2 <task>" first waits).
- `huge`: answers with as many MiB of text as the message says (`4`; default 16), in
  16 KiB pieces (tries the reply byte cap, `maxOutputBytes`).

A custom script is a Python file or module defining `respond(request: ModelRequest)`
returning `ModelReply`, `ModelError` or `ModelStall` (see `nodmix.providers.fake`).
"""

BUILTIN_SCRIPTS = {
    "echo": "nodmix.testing.scripts.echo",
    "tool-then-answer": "nodmix.testing.scripts.tool_then_answer",
    "tool_then_answer": "nodmix.testing.scripts.tool_then_answer",
    "code-mode": "nodmix.testing.scripts.code_mode",
    "code_mode": "nodmix.testing.scripts.code_mode",
    "hang": "nodmix.testing.scripts.hang",
    "trickle": "nodmix.testing.scripts.trickle",
    "huge": "nodmix.testing.scripts.huge",
    "memory-search": "nodmix.testing.scripts.memory_search",
    "memory_search": "nodmix.testing.scripts.memory_search",
    "web-task": "nodmix.testing.scripts.web_task",
    "web_task": "nodmix.testing.scripts.web_task",
    "subagents": "nodmix.testing.scripts.subagents",
}
"""Built-in script names -> their modules."""
