// Approval requests on the web page: a card per batch with Allow once / Always allow / Deny.
// Batches arrive as gateway-wide `approval` events (any origin: this page, the CLI, channels,
// /tools/invoke); answers go back with the `approvals.resolve` method (docs/approvals.md).

import { el } from "./render.js";

const DECISIONS = [
  ["allow-once", "Allow once"],
  ["allow-always", "Always allow"],
  ["deny", "Deny"],
];

export class ApprovalPanel {
  /** `resolve(id, decision)` sends the answer and returns a promise. */
  constructor(container, resolve) {
    this.container = container;
    this.resolve = resolve;
    this.cards = new Map(); // request id -> card element
  }

  /** Show pending requests from `approvals.list` (after a (re)connect). */
  load(requests) {
    this.container.replaceChildren();
    this.cards.clear();
    for (const request of requests) this.show({ batchId: request.id, requests: [request] });
  }

  /** An `approval` event payload. */
  onEvent(payload) {
    if (payload.kind === "approval_requested") this.show(payload);
    else if (payload.kind === "approval_resolved") this.answered(payload.id, payload.decision);
  }

  show(batch) {
    const fresh = batch.requests.filter((r) => !this.cards.has(r.id));
    if (!fresh.length) return;
    const first = fresh[0];
    const buttons = DECISIONS.map(([decision, label]) => {
      const button = el("button", { type: "button", class: `approve-${decision}`, "data-decision": decision }, label);
      button.addEventListener("click", () => this.answer(card, fresh, decision));
      return button;
    });
    const card = el(
      "section",
      { class: "approval", "data-batch": batch.batchId, role: "alertdialog", "aria-label": "Approval needed" },
      el("p", { class: "approval-head" },
        `Approval needed · agent ${first.agentId} · ${first.sessionKey} · from ${first.origin}`),
      el("p", { class: "approval-reason" }, first.reason),
      ...fresh.map((r) =>
        el("div", { class: "approval-item", "data-id": r.id },
          el("code", { class: "approval-command" }, r.command),
          el("span", { class: "approval-cwd" }, ` in ${r.cwd}`)),
      ),
      el("div", { class: "approval-buttons" }, ...buttons),
      el("p", { class: "approval-status", role: "status" }),
    );
    for (const r of fresh) this.cards.set(r.id, card);
    this.container.append(card);
    this.container.hidden = false;
  }

  async answer(card, requests, decision) {
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    try {
      for (const request of requests) await this.resolve(request.id, decision);
    } catch (error) {
      card.querySelector(".approval-status").textContent = error.message;
      for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
  }

  answered(id, decision) {
    const card = this.cards.get(id);
    if (!card) return;
    this.cards.delete(id);
    card.querySelector(`.approval-item[data-id="${CSS.escape(id)}"]`)?.setAttribute("data-decision", decision);
    if ([...this.cards.values()].includes(card)) return; // others of the batch still pending
    card.remove();
    this.container.hidden = this.cards.size === 0;
  }
}
