// Markdown for replies: marked (GFM) renders, DOMPurify sanitises, then code blocks get copy
// buttons. Both libraries come from npm through the gateway (/static/vendor/, pinned and
// hash-verified, never committed). Until they are there, a reply is shown as plain text.
//
// Raw HTML in a reply shows as text. Remote images are not loaded (an image URL is a way to send data out of the page); an image
// becomes a link to it. Links open in a new tab without the page as opener.

let configured = false;

const escapeHtml = (text) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function libraries() {
  const { marked, DOMPurify } = globalThis;
  if (!marked?.parse || !DOMPurify?.sanitize) return null;
  if (!configured) {
    configured = true;
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.getAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
    marked.use({
      gfm: true,
      breaks: true,
      renderer: {
        // Raw HTML in a reply is shown as the text it is, not interpreted.
        html({ text }) {
          return escapeHtml(text);
        },
        image({ href, text }) {
          return `<a href="${escapeHtml(href || "")}">${escapeHtml(text || href || "image")}</a>`;
        },
      },
    });
  }
  return { marked, DOMPurify };
}

/** Copy `text` to the clipboard; resolves true on success. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}

/** A small "copy" button that copies what `source()` returns and says so for a moment. */
export function copyButton(source, label = "copy") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = label;
  button.title = "Copy to the clipboard";
  button.addEventListener("click", async (event) => {
    event.stopPropagation();
    const ok = await copyText(source());
    button.textContent = ok ? "copied" : "copy failed";
    button.dataset.copied = ok ? "true" : "false";
    setTimeout(() => {
      button.textContent = label;
    }, 1500);
  });
  return button;
}

function plain(target, text) {
  const p = document.createElement("p");
  p.className = "plain";
  p.textContent = text;
  target.append(p);
}

/** Render `text` as sanitised Markdown into `target` (replacing what was there). */
export function renderMarkdown(target, text) {
  target.replaceChildren();
  const libs = libraries();
  if (!libs) {
    plain(target, text);
    return;
  }
  const html = libs.marked.parse(text, { async: false });
  const fragment = libs.DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe"],
    FORBID_ATTR: ["style"],
  });
  target.append(fragment);
  for (const pre of target.querySelectorAll("pre")) {
    const wrap = document.createElement("div");
    wrap.className = "code-block";
    pre.replaceWith(wrap);
    wrap.append(copyButton(() => pre.textContent), pre);
  }
}

/** True once the renderer and sanitizer have loaded (the page degrades to plain text). */
export function markdownReady() {
  return libraries() !== null;
}
