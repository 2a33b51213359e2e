// Rendering a conversation: messages, streamed replies, tool calls and code-mode cells.
//
// Everything that comes from a model, a tool or a transcript enters the page as text nodes,
// except a reply's Markdown, which goes through the sanitizer first (markdown.js), so markup in
// a reply is shown or defused, never executed.

import { copyButton, renderMarkdown } from "./markdown.js";

/** Create an element; string children become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node[key] = value;
  }
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function preview(args) {
  const text = Object.entries(args || {})
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(", ")
    .replace(/\n/g, "⏎");
  return text.length > 90 ? `${text.slice(0, 90)}…` : text;
}

/** A code-mode call (`exec` with a program, or `wait` resuming one)? */
function isCodeCell(name, args) {
  return (name === "exec" && typeof args?.code === "string") || (name === "wait" && args?.runId);
}

/** The code-mode result object of a tool result (its details, else its JSON text). */
function codeResult(result) {
  if (result.details && typeof result.details === "object" && result.details.status) {
    return result.details;
  }
  try {
    const parsed = JSON.parse(textOf(result.content));
    return parsed && parsed.status ? parsed : null;
  } catch {
    return null;
  }
}

/** The messages of one session, live (events) or replayed (transcript entries). */
export class Conversation {
  constructor(root) {
    this.root = root;
    this.calls = new Map();
    this.bubble = null;
    this.pendingRender = false;
    this.onWaiting = () => {};
    this.media = null; // `MediaFiles`: fetches workspace images for the history
    this.onOpenSession = () => {};
  }

  clear() {
    this.root.replaceChildren();
    this.calls.clear();
    this.bubble = null;
  }

  scroll() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  place(node, parentCallId) {
    this.root.querySelector(".empty-hint")?.remove();
    const parent = parentCallId ? this.calls.get(parentCallId) : null;
    if (parent && parent.nested) {
      parent.nested.hidden = false;
      parent.nested.previousElementSibling.hidden = false;
      parent.nested.append(el("li", {}, node));
    } else {
      this.root.append(node);
    }
    this.scroll();
  }

  /** A user message; `files` are its pictures and recordings ({path, name, kind, preview}). */
  addUser(text, files = []) {
    this.bubble = null;
    const bubble = el("div", { class: "msg user" }, el("span", { class: "text" }, text));
    const images = files.filter((file) => file.kind === "image");
    if (images.length) {
      bubble.append(
        el(
          "div",
          { class: "msg-images" },
          ...images.map((file) =>
            file.preview
              ? el("img", { class: "msg-image", src: file.preview, alt: file.name || file.path })
              : this.media?.image(file.path, file.name) ?? el("span", {}, `[image ${file.path}]`),
          ),
        ),
      );
    }
    for (const file of files.filter((one) => one.kind !== "image")) {
      const label = file.kind === "voice" ? "voice note" : `file: ${file.name || file.path}`;
      bubble.append(el("div", { class: "msg-file" }, label));
    }
    this.place(bubble);
    return bubble;
  }

  /** Mark a user message that did not get an answer; `retry()` sends it again. */
  markFailed(bubble, reason, retry) {
    bubble.classList.add("failed");
    const button = el("button", { type: "button", class: "retry" }, "Retry");
    button.addEventListener("click", () => {
      bubble.remove();
      retry();
    });
    bubble.append(el("div", { class: "failed-note" }, `Not answered: ${reason} `, button));
  }

  notice(text, level = "info") {
    this.place(el("div", { class: `notice ${level}` }, text));
  }

  /** A hint shown in an empty session; the first message replaces it. */
  hint(text) {
    this.root.append(el("div", { class: "notice empty-hint" }, text));
  }

  appendDelta(text) {
    if (!this.bubble) {
      this.bubble = el("div", { class: "msg assistant streaming", "data-deltas": 0 });
      this.bubble.raw = "";
      this.place(this.bubble);
    }
    const bubble = this.bubble;
    bubble.raw += text;
    bubble.dataset.deltas = String(Number(bubble.dataset.deltas) + 1);
    // Re-render at most once a frame: long replies arrive in many small pieces.
    if (!this.pendingRender) {
      this.pendingRender = true;
      requestAnimationFrame(() => {
        this.pendingRender = false;
        if (!bubble.classList.contains("streaming")) return; // endAssistant rendered it
        renderMarkdown(bubble, bubble.raw);
        this.scroll();
      });
    }
  }

  endAssistant(message) {
    const text = textOf(message.content);
    let bubble = this.bubble;
    if (bubble) {
      bubble.raw = text || bubble.raw;
      bubble.classList.remove("streaming");
    } else if (text) {
      bubble = el("div", { class: "msg assistant" });
      bubble.raw = text;
      this.place(bubble);
    }
    if (bubble) {
      renderMarkdown(bubble, bubble.raw);
      const raw = bubble.raw;
      bubble.append(el("div", { class: "msg-actions" }, copyButton(() => raw, "copy reply")));
    }
    if (message.errorMessage) this.notice(message.errorMessage, "error");
    this.bubble = null;
  }

  /** A message a scheduled job posted into the session (a `session` event, or history). */
  jobMessage(message, jobName = "") {
    const jobId = (message.model || "").replace(/^cron:/, "");
    const raw = textOf(message.content);
    const bubble = el("div", { class: "msg assistant from-job", "data-job": jobId });
    this.place(bubble);
    renderMarkdown(bubble, raw);
    const from = jobName ? `From cron job "${jobName}" (${jobId})` : `From cron job ${jobId}`;
    bubble.prepend(el("div", { class: "job-label" }, from));
    bubble.append(el("div", { class: "msg-actions" }, copyButton(() => raw, "copy message")));
    this.scroll();
  }

  /** A subagent's result announced into the session (a `session` event, or history). */
  subagentMessage(entry) {
    const details = entry.details || {};
    const raw = typeof entry.content === "string" ? entry.content : textOf(entry.content);
    const body = raw.replace(/^\[Subagent [^\n]*\]\s*/, "") || raw;
    const bubble = el("div", { class: "msg assistant from-subagent", "data-run": details.runId || "" });
    this.place(bubble);
    renderMarkdown(bubble, body);
    const name = details.label ? `"${details.label}"` : details.runId;
    const label = el("div", { class: "job-label" }, `From subagent ${name} (${details.status || "done"}) `);
    if (details.sessionKey) {
      const open = el("button", { type: "button", class: "link open-subagent", "data-key": details.sessionKey }, "open its session");
      open.addEventListener("click", () => this.onOpenSession(details.sessionKey));
      label.append(open);
    }
    bubble.prepend(label);
    bubble.append(el("div", { class: "msg-actions" }, copyButton(() => body, "copy result")));
    this.scroll();
  }

  toolStarted({ callId, toolName, arguments: args, parentCallId }) {
    this.bubble = null;
    const view = isCodeCell(toolName, args) ? codeCell(toolName, args) : toolCard(toolName, args);
    view.node.dataset.callId = callId;
    this.calls.set(callId, view);
    this.place(view.node, parentCallId);
  }

  toolFinished({ result, durationMs }) {
    const view = this.calls.get(result.toolCallId);
    if (!view) return;
    view.finish(result, durationMs);
    if (view.status === "waiting") this.onWaiting(view.runId);
  }

  /** Replay transcript entries (as `sessions.history` returns them). */
  load(entries) {
    this.clear();
    for (const entry of entries) {
      if (entry.type === "compaction") {
        this.notice(`Earlier messages were compacted (${entry.tokensBefore} tokens summarised).`);
      } else if (entry.type === "custom_message" && entry.customType === "subagent_result") {
        this.subagentMessage(entry);
      } else if (entry.type === "custom_message" && entry.display) {
        this.notice(textOf(entry.content));
      } else if (entry.type === "message") {
        this.replay(entry.message, entry.parentToolCallId);
      }
    }
    this.bubble = null;
  }

  replay(message, parentCallId) {
    if (message.role === "user" && !parentCallId) {
      const images = (message.content || [])
        .filter((block) => block.type === "imageRef")
        .map((block) => ({ path: block.path, name: block.name, kind: "image" }));
      this.addUser(textOf(message.content), images);
    } else if (message.role === "assistant" && message.api === "cron" && !parentCallId) {
      this.jobMessage(message);
    } else if (message.role === "assistant") {
      if (!parentCallId) this.endAssistant({ ...message, content: message.content.filter((b) => b.type === "text") });
      for (const block of message.content) {
        if (block.type === "toolCall") {
          this.toolStarted({ callId: block.id, toolName: block.name, arguments: block.arguments, parentCallId });
        }
      }
    } else if (message.role === "toolResult") {
      const view = this.calls.get(message.toolCallId);
      if (view) view.finish(message);
    }
  }
}

function toolCard(name, args) {
  const result = el("pre", { class: "result" }, "…");
  const timing = el("span", { class: "timing" });
  const node = el(
    "details",
    { class: "tool", "data-tool": name, "data-state": "running" },
    el("summary", {}, el("strong", {}, name), ` (${preview(args)}) `, timing),
    el(
      "div",
      { class: "body" },
      el("div", { class: "label" }, "arguments"),
      el("pre", {}, pretty(args)),
      el("div", { class: "label" }, "result"),
      result,
    ),
  );
  return {
    node,
    finish(message, durationMs) {
      node.dataset.state = message.isError ? "error" : "ok";
      result.textContent = textOf(message.content) || "(no output)";
      if (durationMs !== undefined) timing.textContent = `${Math.round(durationMs)} ms`;
    },
  };
}

function codeCell(name, args) {
  const status = el("span", { class: "cell-status" }, "running");
  const program =
    name === "exec"
      ? el("pre", { class: "program" }, el("code", {}, args.code))
      : el("pre", { class: "program" }, `resume run ${args.runId}`);
  const nested = el("ul", { class: "nested", hidden: true });
  const output = el("pre", { class: "output", hidden: true });
  const value = el("pre", { class: "value", hidden: true });
  const note = el("p", { class: "waiting-note", hidden: true });
  const labels = {
    output: el("div", { class: "label", hidden: true }, "output"),
    value: el("div", { class: "label", hidden: true }, "value"),
  };
  const node = el(
    "div",
    { class: "cell", "data-tool": name, "data-status": "running" },
    el(
      "div",
      { class: "cell-head" },
      el("span", {}, name === "exec" ? "code mode" : "code mode · wait"),
      status,
      el("span", {}, args.language || ""),
    ),
    el(
      "div",
      { class: "cell-body" },
      el("div", { class: "label" }, name === "exec" ? "program" : "resume"),
      program,
      el("div", { class: "label", hidden: true }, "calls"),
      nested,
      labels.output,
      output,
      labels.value,
      value,
      note,
    ),
  );
  const view = {
    node,
    nested,
    status: "running",
    runId: null,
    finish(message) {
      const outcome = codeResult(message) || { status: message.isError ? "failed" : "completed", value: textOf(message.content) };
      view.status = outcome.status;
      node.dataset.status = outcome.status;
      status.textContent = outcome.status;
      const printed = (outcome.output || []).map((item) => (item.type === "text" ? item.text : pretty(item.value)));
      if (printed.length) {
        output.textContent = printed.join("\n");
        output.hidden = labels.output.hidden = false;
      }
      if (outcome.status === "completed") {
        value.textContent = outcome.value === undefined ? "undefined" : pretty(outcome.value);
        value.hidden = labels.value.hidden = false;
      } else if (outcome.status === "failed") {
        value.textContent = outcome.code ? `${outcome.code}: ${outcome.error}` : String(outcome.error);
        value.hidden = labels.value.hidden = false;
        labels.value.textContent = "error";
      } else if (outcome.status === "waiting") {
        view.runId = outcome.runId;
        const pending = (outcome.pendingToolCalls || []).map((call) => call.toolName || call.toolId || call.id);
        note.textContent =
          `Waiting (run ${outcome.runId}, ${outcome.reason})` + (pending.length ? ` for: ${pending.join(", ")}` : "");
        note.hidden = false;
      }
    },
  };
  return view;
}
