// Answer text to DOM: a small, safe Markdown subset (paragraphs, lists, code, bold,
// italics)
// with [n] citation markers turned into buttons. Text only ever becomes text nodes;
// nothing the server or a model writes is parsed as HTML.

// code | **bold** | [n] marker | *italics* or _italics_ (an underscore inside a word,
// as in snake_case, is not emphasis; neither is a `*` followed by a space)
const INLINE =
  /(`[^`\n]+`)|(\*\*[^*\n]+?\*\*)|(\[(?:Citation\s+)?\d+(?:\s*[,;]\s*\d+)*\])|(\*[^*\s](?:[^*\n]*[^*\s])?\*|(?<![\w])_[^_\s](?:[^_\n]*[^_\s])?_(?![\w]))/g;
const NUMBERS = /\d+/g;
const FENCE = /^\s*```/;
const BULLET = /^\s*[-*+]\s+/;
const ORDERED = /^\s*\d+[.)]\s+/;
const HEADING = /^\s*#{1,6}\s+/;

/**
 * @typedef {object} CiteLookup
 * @property {(n: number, offset: number) => object | null} citation  the citation a
 *   marker at `offset` of the answer text stands for, if known yet
 * @property {(n: number) => object | null} source  the numbered source, if known
 */

/** Build the label a marker button reads out: "Source 2: Title > Section". */
export function sourceLabel(n, cit, src) {
  const title = cit?.title || src?.title || "";
  const section = cit?.section || src?.section || "";
  const where = [title, section].filter(Boolean).join(" › ");
  return where ? `Source ${n}: ${where}` : `Source ${n}`;
}

function citeButton(n, offset, lookup) {
  const cit = lookup.citation(n, offset);
  const src = lookup.source(n);
  const b = document.createElement("button");
  b.type = "button";
  b.className = "cite";
  b.dataset.n = String(n);
  b.dataset.offset = String(offset);
  b.textContent = String(n);
  let label = sourceLabel(n, cit, src);
  if (cit && cit.supported === false) {
    b.classList.add("cite-unverified");
    label += " (not confirmed by the passage)";
  }
  b.setAttribute("aria-label", label);
  b.title = label;
  return b;
}

/** Inline spans of one line; `base` is the line's offset in the answer text. */
function inline(parent, text, base, lookup) {
  let pos = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > pos) parent.append(text.slice(pos, at));
    if (m[1]) {
      const code = document.createElement("code");
      code.textContent = m[1].slice(1, -1);
      parent.append(code);
    } else if (m[2]) {
      const strong = document.createElement("strong");
      inline(strong, m[2].slice(2, -2), base + at + 2, lookup);
      parent.append(strong);
    } else if (m[4]) {
      const em = document.createElement("em");
      inline(em, m[4].slice(1, -1), base + at + 1, lookup);
      parent.append(em);
    } else if (!lookup) {
      parent.append(m[3]); // quoted source text: a bracket there is not our marker
    } else {
      const group = document.createElement("span");
      group.className = "cites";
      for (const n of m[3].matchAll(NUMBERS)) {
        group.append(citeButton(Number(n[0]), base + at, lookup));
      }
      parent.append(group);
    }
    pos = at + m[0].length;
  }
  if (pos < text.length) parent.append(text.slice(pos));
}

/** Split into lines, keeping each line's start offset. */
function linesOf(text) {
  const out = [];
  let start = 0;
  for (const line of text.split("\n")) {
    out.push({ line, start });
    start += line.length + 1;
  }
  return out;
}

/**
 * Render `text` into `root` (replacing its children).
 * @param {HTMLElement} root
 * @param {string} text
 * @param {CiteLookup | null} lookup  null renders markers as plain text
 */
export function renderAnswer(root, text, lookup) {
  const frag = document.createDocumentFragment();
  const lines = linesOf(text);
  let para = null;
  let list = null;

  const closeBlocks = () => {
    para = null;
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const { line, start } = lines[i];
    if (FENCE.test(line)) {
      closeBlocks();
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      const body = [];
      for (i++; i < lines.length && !FENCE.test(lines[i].line); i++) body.push(lines[i].line);
      code.textContent = body.join("\n");
      pre.append(code);
      frag.append(pre);
      continue;
    }
    if (line.trim() === "") {
      closeBlocks();
      continue;
    }
    const bullet = line.match(BULLET) || line.match(ORDERED);
    if (bullet) {
      const tag = BULLET.test(line) ? "UL" : "OL";
      if (!list || list.tagName !== tag) {
        list = document.createElement(tag.toLowerCase());
        frag.append(list);
      }
      para = null;
      const li = document.createElement("li");
      inline(li, line.slice(bullet[0].length), start + bullet[0].length, lookup);
      list.append(li);
      continue;
    }
    list = null;
    if (HEADING.test(line)) {
      const h = line.match(HEADING)[0];
      const p = document.createElement("p");
      p.className = "md-heading";
      inline(p, line.slice(h.length), start + h.length, lookup);
      frag.append(p);
      para = null;
      continue;
    }
    if (!para) {
      para = document.createElement("p");
      frag.append(para);
    } else {
      para.append(document.createElement("br"));
    }
    inline(para, line, start, lookup);
  }
  root.replaceChildren(frag);
}

/** An absolute http(s) link for a source, or null: other schemes (javascript:, file:)
 * and relative paths are never made clickable. */
export function sourceHref(url, anchor) {
  if (!url) return null;
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return null;
  if (anchor && !parsed.hash) parsed.hash = anchor;
  return parsed.href;
}

/** Source text as stored (hard-wrapped Markdown) to flowing text: single line breaks
 * become spaces, blank lines stay paragraph breaks. */
export function unwrap(text) {
  return text.replace(/([^\n])\n(?![\n\s]*(?:[-*+]\s|\d+[.)]\s|```|#))(?!\n)/g, "$1 ");
}
