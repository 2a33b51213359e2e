// Pictures and recordings in the web page: files pasted, dropped or picked go up to the
// gateway at once (POST /media/upload), wait beside the composer as chips, and leave with the
// next message as its attachments; the microphone button records a voice note (MediaRecorder)
// that is sent as soon as the recording stops. Images in the history are fetched with the
// token (GET /media/file) and shown from blob URLs.

import { el } from "./render.js";

const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,audio/*";
const UPLOAD_ATTEMPTS = 10;

function authHeaders(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function failure(response) {
  try {
    const body = await response.json();
    return body?.error?.message || `upload failed (HTTP ${response.status})`;
  } catch {
    return `upload failed (HTTP ${response.status})`;
  }
}

/** Fetches workspace images for the history, once per path (blob URLs, kept for the page). */
export class MediaFiles {
  constructor(token, agentId) {
    this.token = token;
    this.agentId = agentId;
    this.urls = new Map();
  }

  url(path) {
    const key = `${this.agentId()}:${path}`;
    if (!this.urls.has(key)) {
      const query = new URLSearchParams({ agentId: this.agentId(), path });
      this.urls.set(
        key,
        fetch(`/media/file?${query}`, { headers: authHeaders(this.token()) }).then(async (response) => {
          if (!response.ok) throw new Error(await failure(response));
          return URL.createObjectURL(await response.blob());
        }),
      );
    }
    return this.urls.get(key);
  }

  /** An <img> for a workspace image (a note in its place if it cannot be fetched). */
  image(path, name) {
    const img = el("img", { class: "msg-image", alt: name || path, title: name || path });
    this.url(path).then(
      (url) => { img.src = url; },
      () => img.replaceWith(el("span", { class: "image-missing" }, `[image ${path} is not available]`)),
    );
    return img;
  }
}

/** The files waiting to go with the next message. */
export class Attachments {
  constructor(root, { token, agentId, onError, onVoice }) {
    this.root = root;
    this.token = token;
    this.agentId = agentId;
    this.onError = onError;
    this.onVoice = onVoice;
    this.items = [];
    this.recorder = null;
  }

  get uploading() {
    return this.items.some((item) => item.state === "uploading");
  }

  get ready() {
    return this.items.filter((item) => item.state === "ready");
  }

  /** Upload `file` (a File or Blob) and show it as a chip until the message goes. */
  async add(file, kind = "") {
    const name = file.name || (kind === "voice" ? "recording.webm" : "pasted-image.png");
    const item = { state: "uploading", name, preview: null, node: null };
    if (file.type.startsWith("image/")) item.preview = URL.createObjectURL(file);
    this.items.push(item);
    this.render();
    const query = new URLSearchParams({ agentId: this.agentId(), name });
    if (kind) query.set("kind", kind);
    try {
      const response = await this.send(query, file);
      if (!response.ok) throw new Error(await failure(response));
      item.uploaded = await response.json();
      item.state = "ready";
    } catch (error) {
      this.remove(item);
      this.onError(`${name}: ${error.message}`);
      return null;
    }
    this.render();
    return item;
  }

  /** POST the file; while the gateway is receiving too many uploads (429/503 with
   * Retry-After: gateway.maxUploadsPerClient / maxConcurrentUploads), wait and try again. */
  async send(query, file) {
    for (let attempt = 1; ; attempt += 1) {
      const response = await fetch(`/media/upload?${query}`, {
        method: "POST",
        headers: { "Content-Type": file.type || "application/octet-stream", ...authHeaders(this.token()) },
        body: file,
      });
      const busy = response.status === 429 || response.status === 503;
      if (!busy || attempt >= UPLOAD_ATTEMPTS || !response.headers.has("Retry-After")) return response;
      const seconds = Number(response.headers.get("Retry-After")) || 1;
      await new Promise((resolve) => setTimeout(resolve, Math.min(seconds, 10) * 1000));
    }
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    if (item.preview) URL.revokeObjectURL(item.preview);
    this.render();
  }

  /** The uploaded files for the `agent` request, and what the message bubble shows. */
  take() {
    const ready = this.ready;
    this.items = this.items.filter((item) => item.state !== "ready");
    this.render();
    return {
      attachments: ready.map(({ uploaded }) => ({ path: uploaded.path, kind: uploaded.kind, name: uploaded.name })),
      shown: ready.map(({ uploaded, preview }) => ({ path: uploaded.path, name: uploaded.name, kind: uploaded.kind, preview })),
    };
  }

  render() {
    this.root.hidden = this.items.length === 0;
    this.root.replaceChildren(
      ...this.items.map((item) => {
        const remove = el("button", { type: "button", class: "chip-remove", title: "Remove", "aria-label": `Remove ${item.name}` }, "×");
        remove.addEventListener("click", () => this.remove(item));
        return el(
          "span",
          { class: "chip", "data-state": item.state },
          item.preview ? el("img", { src: item.preview, alt: "" }) : null,
          el("span", { class: "chip-name" }, item.name),
          item.state === "uploading" ? el("span", { class: "chip-state" }, "uploading…") : remove,
        );
      }),
    );
  }

  /** Paste into `input`, drop onto `zone`, pick with `button`, record with `mic`. */
  wire({ input, zone, button, picker, mic }) {
    picker.accept = ACCEPT;
    button.addEventListener("click", () => picker.click());
    picker.addEventListener("change", () => {
      for (const file of picker.files) this.add(file);
      picker.value = "";
    });
    input.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      for (const file of files) this.add(file);
    });
    zone.addEventListener("dragover", (event) => {
      if (![...event.dataTransfer.types].includes("Files")) return;
      event.preventDefault();
      zone.classList.add("dropping");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("dropping"));
    zone.addEventListener("drop", (event) => {
      zone.classList.remove("dropping");
      const files = [...(event.dataTransfer?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      for (const file of files) this.add(file);
    });
    mic.hidden = !window.MediaRecorder || !navigator.mediaDevices?.getUserMedia;
    mic.addEventListener("click", () => this.toggleRecording(mic));
  }

  async toggleRecording(mic) {
    if (this.recorder) {
      this.recorder.stop();
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (error) {
      this.onError(`The microphone is not available: ${error.message}`);
      return;
    }
    const chunks = [];
    const recorder = new MediaRecorder(stream);
    this.recorder = recorder;
    mic.classList.add("recording");
    mic.textContent = "Stop";
    recorder.ondataavailable = (event) => event.data.size && chunks.push(event.data);
    recorder.onstop = async () => {
      for (const track of stream.getTracks()) track.stop();
      this.recorder = null;
      mic.classList.remove("recording");
      mic.textContent = "Record";
      const type = recorder.mimeType || "audio/webm";
      const item = await this.add(new File(chunks, "recording.webm", { type }), "voice");
      if (item) this.onVoice();
    };
    recorder.start();
  }
}
