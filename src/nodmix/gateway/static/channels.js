// The sidebar's Channels section: each configured chat channel's state, and pending pairing
// requests with an Approve button. Reads `channels.status`, approves with `pairing.approve`.

import { el } from "./render.js";

const REFRESH_MS = 5000;

function ago(seconds) {
  if (!seconds) return "no messages yet";
  const delta = Math.max(0, Date.now() / 1000 - seconds);
  if (delta < 60) return "last message just now";
  if (delta < 3600) return `last message ${Math.floor(delta / 60)} min ago`;
  return `last message ${Math.floor(delta / 3600)} h ago`;
}

function channelRow(row) {
  const state = row.connected ? "connected" : row.lastError ? "error" : "connecting";
  const counts = [`${row.received ?? 0} in`, `${row.answered ?? 0} answered`];
  if (row.refused || row.ignored) counts.push(`${(row.refused ?? 0) + (row.ignored ?? 0)} refused`);
  return el(
    "li",
    { class: "channel", "data-channel": row.channel, "data-state": state },
    el("span", { class: "channel-name" }, row.channel),
    el("span", { class: "channel-state" }, state + (row.account ? ` as ${row.account}` : "")),
    el("span", { class: "meta" }, `${counts.join(" · ")} · ${ago(row.lastEventAt)}`),
    row.lastError && !row.connected ? el("span", { class: "meta error" }, row.lastError) : null,
  );
}

export class ChannelsPanel {
  constructor(root, { request, onError }) {
    this.root = root;
    this.request = request;
    this.onError = onError;
    this.timer = null;
  }

  start() {
    this.refresh();
    clearInterval(this.timer);
    this.timer = setInterval(() => this.refresh(), REFRESH_MS);
  }

  async refresh() {
    let listing;
    try {
      listing = await this.request("channels.status");
    } catch {
      return; // disconnected: the next refresh tries again
    }
    const channels = listing.channels || [];
    this.root.hidden = channels.length === 0;
    const pending = channels.flatMap((row) => row.pending || []);
    this.root.querySelector(".channel-list").replaceChildren(...channels.map(channelRow));
    this.root.querySelector(".pairings").replaceChildren(...pending.map((p) => this.pairingRow(p)));
  }

  pairingRow(request) {
    const who = request.senderName ? `${request.senderName} (${request.senderId})` : request.senderId;
    const approve = el("button", { type: "button", class: "approve", title: `Let ${who} talk to the agent` }, "Approve");
    approve.addEventListener("click", async () => {
      approve.disabled = true;
      try {
        await this.request("pairing.approve", { channel: request.channel, code: request.code });
      } catch (error) {
        this.onError(`Pairing: ${error.message}`);
      }
      await this.refresh();
    });
    return el(
      "li",
      { class: "pairing", "data-code": request.code },
      el("span", { class: "pairing-who" }, `${request.channel}: ${who}`),
      el("code", {}, request.code),
      approve,
    );
  }
}
