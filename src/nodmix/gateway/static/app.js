// The Nodmix web page: log in once, chat with streaming replies, switch and create sessions.
// It speaks the gateway's WebSocket protocol (docs/gateway.md); nothing here is built or bundled.

import { ApprovalPanel } from "./approvals.js";
import { ChannelsPanel } from "./channels.js";
import { groupJobRuns, jobGroup } from "./job_runs.js";
import { Attachments, MediaFiles } from "./media.js";
import { Conversation, el } from "./render.js";
import { refreshSkills, wireSkills } from "./skills.js";

const TOKEN_KEY = "nodmix.token";
const SESSION_KEY = "nodmix.session";
const PROTOCOL = "nodmix.v1";
const $ = (id) => document.getElementById(id);

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

class RequestError extends Error {
  constructor(error) {
    super(error.message || "request failed");
    this.code = error.code;
  }
}

/** The WebSocket connection: requests with ids, answers, and run events routed by request id. */
class GatewaySocket {
  constructor(token, { onOpen, onClose }) {
    this.token = token;
    this.onOpen = onOpen;
    this.onClose = onClose;
    this.nextId = 1;
    this.pending = new Map();
    this.retryMs = 500;
  }

  connect() {
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
    const protocols = [PROTOCOL];
    if (this.token) protocols.push(`nodmix.bearer.${base64url(this.token)}`);
    const ws = new WebSocket(url, protocols);
    this.ws = ws;
    ws.onopen = () => {
      this.retryMs = 500;
      this.onOpen();
    };
    ws.onmessage = (message) => this.receive(JSON.parse(message.data));
    ws.onclose = () => {
      for (const { reject } of this.pending.values()) reject(new RequestError({ message: "connection lost" }));
      this.pending.clear();
      this.onClose();
      setTimeout(() => this.connect(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 8000);
    };
  }

  receive(frame) {
    if (frame.type === "event" && frame.event === "approval") {
      this.onApproval?.(frame.payload);
    } else if (frame.type === "event" && frame.event === "session") {
      this.onSession?.(frame.payload);
    } else if (frame.type === "event") {
      this.pending.get(String(frame.payload.reqId))?.onEvent?.(frame.payload);
    } else if (frame.type === "res") {
      const waiter = this.pending.get(String(frame.id));
      if (!waiter) return;
      this.pending.delete(String(frame.id));
      if (frame.ok) waiter.resolve(frame.payload);
      else waiter.reject(new RequestError(frame.error || {}));
    }
  }

  request(method, params = {}, onEvent = null) {
    const id = String(this.nextId++);
    return new Promise((resolve, reject) => {
      if (this.ws?.readyState !== WebSocket.OPEN) {
        reject(new RequestError({ message: "not connected to the gateway" }));
        return;
      }
      this.pending.set(id, { resolve, reject, onEvent });
      this.ws.send(JSON.stringify({ type: "req", id, method, params }));
    });
  }
}

const state = {
  socket: null,
  agentId: "main",
  sessionKey: localStorage.getItem(SESSION_KEY) || "agent:main:main",
  shownKey: null,
  viewing: null,
  runId: null,
  busy: false,
};
const conversation = new Conversation($("messages"));
const approvals = new ApprovalPanel($("approvals"), (id, decision) =>
  state.socket.request("approvals.resolve", { id, decision }),
);
const channelsPanel = new ChannelsPanel($("channels"), {
  request: (method, params) => state.socket.request(method, params),
  onError: (text) => conversation.notice(text, "warning"),
});
conversation.onWaiting = (runId) => setRunState("waiting", `code-mode run ${runId} is waiting`);
conversation.media = new MediaFiles(() => state.socket?.token, () => state.agentId);
const attachments = new Attachments($("attachments"), {
  token: () => state.socket?.token,
  agentId: () => state.agentId,
  onError: (text) => conversation.notice(text, "error"),
  onVoice: () => $("composer").requestSubmit(),
});
conversation.onOpenSession = (key) => switchSession(key).then(refreshSessions).catch(() => {});

function setRunState(name, text) {
  const label = { idle: "", queued: "queued behind another turn…", running: "running…" };
  $("run-state").dataset.state = name;
  $("run-state").textContent = text ?? label[name] ?? name;
  const active = name !== "idle";
  $("stop").hidden = !active;
  $("send").disabled = active;
}

function sessionName(key) {
  return key.split(":").slice(2).join(":");
}

function showSession(key, title) {
  // Never show one session's messages under another's title while its history loads.
  if (key !== state.shownKey || state.viewing) conversation.clear();
  state.viewing = null;
  $("composer").hidden = false;
  state.shownKey = key;
  state.sessionKey = key;
  localStorage.setItem(SESSION_KEY, key);
  const label = title ?? document.querySelector(`#sessions button[data-key="${CSS.escape(key)}"] .name`)?.textContent;
  $("session-title").replaceChildren(
    label || sessionName(key),
    el("span", { class: "agent-tag" }, ` · agent ${key.split(":")[1]}`),
  );
  for (const button of document.querySelectorAll("#sessions button.session")) {
    button.classList.toggle("active", button.dataset.key === key);
  }
}

function ago(ms) {
  const seconds = Math.max(0, (Date.now() - ms) / 1000);
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

function sessionRow(row) {
  let meta = row.fresh ? "new" : `${row.messageCount} messages · ${ago(row.updatedAt)}`;
  if (row.kind === "subagent") meta = `subagent · ${meta}`;
  const open = el(
    "button",
    { type: "button", "data-key": row.key, class: `session${row.key === state.sessionKey ? " active" : ""}` },
    el("span", { class: `name${row.running ? " busy" : ""}` }, row.label || row.name),
    el("span", { class: "meta" }, meta),
  );
  const nested = row.depth ? { class: "child", style: `--depth: ${row.depth}`, "data-parent": row.spawnedBy } : {};
  open.addEventListener("click", () => switchSession(row.key));
  if (row.fresh) return el("li", nested, open);
  const rename = el("button", { type: "button", class: "rename", title: "Rename", "aria-label": "Rename" }, "✎");
  rename.addEventListener("click", () => renameSession(row));
  const remove = el("button", { type: "button", class: "delete", title: "Delete", "aria-label": "Delete" }, "🗑");
  remove.addEventListener("click", () => deleteSession(row));
  return el("li", { "data-key": row.key, ...nested }, open, el("span", { class: "row-actions" }, rename, remove));
}

/** Sessions with each subagent's session right under the session that spawned it (indented by
 * depth); a subagent whose parent is not listed stays at the top level. */
function nestSessions(rows) {
  const listed = new Set(rows.map((row) => row.key));
  const children = new Map();
  const top = [];
  for (const row of rows) {
    if (row.spawnedBy && listed.has(row.spawnedBy) && row.spawnedBy !== row.key) {
      if (!children.has(row.spawnedBy)) children.set(row.spawnedBy, []);
      children.get(row.spawnedBy).push(row);
    } else {
      top.push(row);
    }
  }
  const out = [];
  const seen = new Set();
  const visit = (row, depth) => {
    if (seen.has(row.key)) return;
    seen.add(row.key);
    out.push({ ...row, depth });
    for (const child of children.get(row.key) || []) visit(child, depth + 1);
  };
  for (const row of top) visit(row, 0);
  return out;
}

function earlierRow(row) {
  const label = { replaced: "replaced by /new", continued: "continued", archived: "archived", deleted: "deleted", unindexed: "unindexed" };
  const open = el(
    "button",
    { type: "button", class: "session earlier", "data-session-id": row.sessionId },
    el("span", { class: "name" }, row.key ? sessionName(row.key) : row.sessionId.slice(0, 8)),
    el("span", { class: "meta" }, `${label[row.status] || row.status} · ${row.messageCount} messages · ${ago(row.updatedAt)}`),
  );
  open.addEventListener("click", () => showEarlier(row));
  return el("li", {}, open);
}

async function refreshSessions() {
  const listing = await state.socket.request("sessions.list", { agentId: state.agentId, oneShot: false, all: true });
  const sessions = listing.sessions;
  const hidden = listing.oneShotHidden || 0;
  $("sessions-note").textContent = hidden
    ? `${hidden} one-shot API session${hidden === 1 ? "" : "s"} not shown`
    : "";
  const { sessions: conversations, groups } = groupJobRuns(sessions);
  const rows = sessions.some((row) => row.key === state.sessionKey)
    ? conversations
    : [{ key: state.sessionKey, name: sessionName(state.sessionKey), messageCount: 0, fresh: true }, ...conversations];
  $("sessions").replaceChildren(
    ...nestSessions(rows).map(sessionRow),
    ...groups.map((group) => jobGroup(group, sessionRow, state.sessionKey, ago)),
  );
  const others = (listing.others || []).filter((row) => row.status !== "continued");
  $("earlier").hidden = others.length === 0;
  $("earlier-count").textContent = String(others.length);
  $("earlier-list").replaceChildren(...others.map(earlierRow));
}

async function renameSession(row) {
  const title = prompt("New title for this session", row.label || row.name);
  if (title === null || !title.trim()) return;
  try {
    await state.socket.request("sessions.rename", { sessionKey: row.key, agentId: state.agentId, title: title.trim() });
  } catch (error) {
    conversation.notice(`Rename: ${error.message}`, "warning");
  }
  await refreshSessions();
  if (row.key === state.sessionKey) showSession(row.key, title.trim());
}

async function deleteSession(row) {
  if (!confirm(`Delete "${row.label || row.name}"? Its transcript moves to the trash folder.`)) return;
  try {
    await state.socket.request("sessions.delete", { sessionKey: row.key, agentId: state.agentId });
  } catch (error) {
    conversation.notice(`Delete: ${error.message}`, "warning");
    return;
  }
  if (row.key === state.sessionKey) await switchSession(`agent:${state.agentId}:main`);
  await refreshSessions();
}

async function showEarlier(row) {
  state.viewing = row.sessionId;
  conversation.clear();
  $("session-title").replaceChildren(
    row.key ? sessionName(row.key) : row.sessionId.slice(0, 8),
    el("span", { class: "agent-tag" }, ` · earlier session ${row.sessionId.slice(0, 8)} (read-only)`),
  );
  for (const button of document.querySelectorAll("#sessions button.session")) button.classList.remove("active");
  $("composer").hidden = true;
  try {
    const history = await state.socket.request("sessions.history", { sessionId: row.sessionId });
    if (state.viewing !== row.sessionId) return;
    conversation.load(history.entries);
    conversation.notice(`This session was ${row.status}; it is shown read-only.`);
  } catch (error) {
    conversation.notice(error.message, "error");
  }
}

async function loadHistory() {
  const key = state.sessionKey;
  try {
    const history = await state.socket.request("sessions.history", { sessionKey: key });
    if (key !== state.sessionKey) return;
    conversation.load(history.entries);
    if (!history.entries.length) conversation.hint("No messages yet. Say hello.");
    if (history.running && !state.busy) setRunState("running", "a turn is running in this session");
  } catch (error) {
    conversation.clear();
    if (error.code === "unknown_session") conversation.hint("No messages yet. Say hello.");
    else conversation.notice(error.message, "error");
  }
  conversation.scroll();
}

/** A message a scheduled job posted into a session (a reminder), or a subagent's result:
 * shown if that session is open. */
function onSessionMessage(payload) {
  if (payload.kind !== "message") return;
  if (payload.sessionKey === state.sessionKey && !state.viewing) {
    if (payload.source?.kind === "subagent") conversation.subagentMessage(payload.entry);
    else conversation.jobMessage(payload.entry.message, payload.source?.jobName);
  }
  refreshSessions().catch(() => {});
}

async function switchSession(key) {
  showSession(key);
  if (!state.busy) setRunState("idle");
  await loadHistory();
}

async function refreshHealth() {
  const health = await state.socket.request("health");
  const banner = $("banner");
  const config = health.config || {};
  if (config.error) {
    banner.textContent = `The config file has an error, so the gateway keeps its old settings: ${config.error}`;
  } else if (config.restartRequired) {
    banner.textContent = `Configuration changed (${config.changedSections.join(", ")}); restart the gateway to apply.`;
  }
  banner.hidden = !(config.error || config.restartRequired);
  return health;
}

function onRunEvent(event, key) {
  if (event.kind === "accepted") {
    state.runId = event.runId;
    if (event.queued) setRunState("queued");
  }
  if (key !== state.sessionKey) return; // the user switched away; the transcript keeps it all
  switch (event.kind) {
    case "turn_started":
      setRunState("running");
      break;
    case "text_delta":
      if ($("run-state").dataset.state !== "running") setRunState("running");
      conversation.appendDelta(event.text);
      break;
    case "assistant_message":
      conversation.endAssistant(event.message);
      break;
    case "tool_started":
      if ($("run-state").dataset.state === "waiting") setRunState("running");
      conversation.toolStarted(event);
      break;
    case "tool_finished":
      conversation.toolFinished(event);
      break;
    case "compaction":
      if (event.phase === "start") conversation.notice("Compacting the conversation…");
      else if (event.phase === "end") {
        conversation.notice(`Compacted: ${event.tokensBefore ?? "?"} → ${event.tokensAfter ?? "?"} tokens.`);
      } else conversation.notice(event.message || "Compaction failed.", "warning");
      break;
    case "notice":
      conversation.notice(event.text, event.level);
      break;
    case "model_fallback":
      conversation.notice(`${event.failed} failed (${event.error}); trying ${event.next}.`, "warning");
      break;
    // `turn_failed` is followed by the request's error answer, which `send` shows.
  }
}

async function send(text, files = attachments.take()) {
  const key = state.sessionKey;
  state.busy = true;
  const bubble = conversation.addUser(text, files.shown);
  setRunState("running", "starting…");
  try {
    const params = { message: text, sessionKey: key, agentId: state.agentId };
    if (files.attachments.length) params.attachments = files.attachments;
    const answer = await state.socket.request("agent", params, (event) => onRunEvent(event, key));
    if (answer.command && key === state.sessionKey) await loadHistory();
    if (answer.command) conversation.notice(answer.message);
  } catch (error) {
    if (key === state.sessionKey) {
      if (error.code === "aborted") conversation.notice("Stopped.", "info");
      else {
        conversation.notice(error.message, "error");
        conversation.markFailed(bubble, error.code || "error", () => retry(text, key, files));
      }
    }
  } finally {
    state.busy = false;
    state.runId = null;
    setRunState("idle");
    refreshSessions().catch(() => {});
  }
}

function retry(text, key, files) {
  if (state.busy || key !== state.sessionKey) return;
  send(text, files);
}

function wireUi() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value.trim();
    if ((!text && !attachments.ready.length) || state.busy || attachments.uploading) return;
    $("input").value = "";
    send(text);
  });
  attachments.wire({
    input: $("input"),
    zone: $("composer"),
    button: $("attach"),
    picker: $("file-picker"),
    mic: $("record"),
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => {
    if (state.runId) state.socket.request("agent.abort", { runId: state.runId }).catch(() => {});
  });
  $("new-session").addEventListener("click", async () => {
    const row = await state.socket.request("sessions.create", { agentId: state.agentId });
    showSession(row.key);
    await refreshSessions();
    await switchSession(row.key);
  });
  $("compact").addEventListener("click", async () => {
    const key = state.sessionKey;
    try {
      const done = await state.socket.request("sessions.compact", { sessionKey: key }, (event) =>
        onRunEvent(event, key),
      );
      await loadHistory();
      if (key === state.sessionKey) conversation.notice(done.message);
    } catch (error) {
      conversation.notice(`Compact: ${error.message}`, "warning");
    }
  });
  $("agent").addEventListener("change", async () => {
    state.agentId = $("agent").value;
    showSession(`agent:${state.agentId}:main`);
    await refreshSessions();
    await loadHistory();
    await refreshSkills(state.socket, state.agentId);
  });
  wireSkills(() => state.socket, () => state.agentId);
  $("forget-token").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
}

async function onConnected() {
  $("status").textContent = "connected";
  const health = await refreshHealth();
  const agents = health.agents.map((agent) => agent.id);
  state.agentId = state.sessionKey.split(":")[1];
  if (!agents.includes(state.agentId)) {
    state.agentId = health.defaultAgent;
    state.sessionKey = `agent:${state.agentId}:main`;
  }
  $("agent").replaceChildren(
    ...health.agents.map((agent) =>
      el("option", { value: agent.id, selected: agent.id === state.agentId }, `${agent.id} (${agent.model ?? "no model"})`),
    ),
  );
  showSession(state.sessionKey);
  approvals.load((await state.socket.request("approvals.list")).requests);
  await refreshSessions();
  await loadHistory();
  await refreshSkills(state.socket, state.agentId);
  await channelsPanel.refresh();
  document.body.dataset.ready = "true";
}

function openApp(token) {
  $("login").hidden = true;
  $("app").hidden = false;
  $("forget-token").hidden = !token;
  wireUi();
  state.socket = new GatewaySocket(token, {
    onOpen: () => onConnected().catch((error) => conversation.notice(error.message, "error")),
    onClose: () => {
      $("status").textContent = "disconnected, reconnecting…";
      document.body.dataset.ready = "false";
    },
  });
  state.socket.onApproval = (payload) => approvals.onEvent(payload);
  state.socket.onSession = onSessionMessage;
  state.socket.connect();
  setInterval(() => refreshHealth().catch(() => {}), 15000);
  channelsPanel.start();
}

async function tokenAccepted(token) {
  const response = await fetch("/v1/models", { headers: { Authorization: `Bearer ${token}` } });
  return response.status !== 401;
}

function showLogin(message) {
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
}

// The banner's link carries the token in the fragment (`#token=...`), which the browser never
// sends to the server. Keep it like a typed one, and take it out of the address bar (and so
// out of the history and of bookmarks).
function tokenFromAddress() {
  const match = /(?:^|&)token=([^&]*)/.exec(location.hash.slice(1));
  if (!match) return null;
  history.replaceState(null, "", location.pathname + location.search);
  try {
    return decodeURIComponent(match[1]) || null;
  } catch {
    return null;
  }
}

// A link pasted into a tab that already shows the page only changes the fragment: start over.
window.addEventListener("hashchange", () => {
  if (/(?:^|&)token=/.test(location.hash.slice(1))) location.reload();
});

async function start() {
  const linked = tokenFromAddress();
  if (linked) localStorage.setItem(TOKEN_KEY, linked);
  const health = await (await fetch("/health")).json();
  if (health.auth !== "token") {
    openApp(null);
    return;
  }
  const saved = localStorage.getItem(TOKEN_KEY);
  if (saved && (await tokenAccepted(saved))) {
    openApp(saved);
    return;
  }
  if (saved) localStorage.removeItem(TOKEN_KEY);
  const why = linked ? "The token in the link was not accepted." : "The saved token is no longer accepted.";
  showLogin(saved ? why : "");
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!(await tokenAccepted(token))) {
      $("login-error").textContent = "That token was not accepted.";
      return;
    }
    localStorage.setItem(TOKEN_KEY, token);
    openApp(token);
  });
}

start().catch((error) => {
  document.body.append(el("p", { class: "error" }, `Could not reach the gateway: ${error.message}`));
});
