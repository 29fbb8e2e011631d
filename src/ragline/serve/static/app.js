// The ragline chat page: asks POST api/chat, paints the streamed answer, and opens
// the passage behind each [n] marker. Plain ES modules, no build step.

import { parseData, readEvents } from "./sse.js";
import { renderAnswer, sourceHref, unwrap } from "./render.js";
import {
  loadApiKey,
  loadConversations,
  newId,
  saveApiKey,
  saveConversations,
} from "./store.js";

const MIN_QUESTION = 3;
const MAX_QUESTION = 1000;
const LEVEL_TEXT = { high: "High confidence", medium: "Medium confidence", low: "Low confidence" };

const $ = (id) => document.getElementById(id);
const el = {
  app: $("app"),
  sidebar: $("sidebar"),
  scrim: $("scrim"),
  menuBtn: $("menu-btn"),
  sidebarClose: $("sidebar-close"),
  newChat: $("new-chat"),
  topbarNew: $("topbar-new"),
  history: $("history"),
  historyEmpty: $("history-empty"),
  title: $("chat-title"),
  thread: $("thread"),
  welcome: $("welcome"),
  messages: $("messages"),
  composer: $("composer"),
  question: $("question"),
  send: $("send"),
  stop: $("stop"),
  notice: $("notice"),
  passage: $("passage"),
  passageKicker: $("passage-kicker"),
  passageBody: $("passage-body"),
  passageClose: $("passage-close"),
  settings: $("settings"),
  openSettings: $("open-settings"),
  keyState: $("key-state"),
  apiKey: $("api-key"),
  keyClear: $("key-clear"),
  keyCancel: $("key-cancel"),
};

const state = {
  conversations: loadConversations(),
  current: null, // the open conversation, or null for a new chat not yet asked
  streaming: null, // {controller, msg, node} while an answer is being written
  retryUntil: 0, // a 429's Retry-After, as a Date.now() deadline
  retryTimer: 0,
  passageReturn: null, // the element to give focus back to when the passage closes
};

// --- helpers ------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

function icon(path) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  const p = document.createElementNS("http://www.w3.org/2000/svg", "path");
  p.setAttribute("d", path);
  svg.append(p);
  return svg;
}

const ICONS = {
  trash: "M5 7h14M10 11v6M14 11v6M6 7l1 12h10l1-12M9 7V4h6v3",
  info: "M12 8h.01M11 12h1v5h1M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18z",
  alert: "M12 9v4M12 17h.01M10.3 3.9 2 18a2 2 0 0 0 1.7 3h16.6a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z",
  file: "M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8zM14 3v5h5",
  link: "M14 4h6v6M20 4l-9 9M18 14v5a1 1 0 0 1-1 1H5a1 1 0 0 1-1-1V7a1 1 0 0 1 1-1h5",
  copy: "M9 9h10v11H9zM5 15V4h10",
  check: "M5 12l5 5 9-10",
  chevron: "M9 6l6 6-6 6",
  up: "M7 11v9H4v-9zM7 11l4-8a2 2 0 0 1 3 2l-1 5h6a2 2 0 0 1 2 2l-2 7a2 2 0 0 1-2 1H7",
  down: "M7 13V4H4v9zM7 13l4 8a2 2 0 0 0 3-2l-1-5h6a2 2 0 0 0 2-2l-2-7a2 2 0 0 0-2-1H7",
};

function announce(text) {
  el.notice.hidden = !text;
  el.notice.textContent = text;
}

function isNarrow() {
  return window.matchMedia("(max-width: 899px)").matches;
}

function nearBottom() {
  const t = el.thread;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 120;
}

function scrollToEnd(force = false) {
  if (force || nearBottom()) el.thread.scrollTop = el.thread.scrollHeight;
}

function relativeTime(ms) {
  const diff = (ms - Date.now()) / 1000;
  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  const abs = Math.abs(diff);
  if (abs < 60) return rtf.format(Math.round(diff), "second");
  if (abs < 3600) return rtf.format(Math.round(diff / 60), "minute");
  if (abs < 86400) return rtf.format(Math.round(diff / 3600), "hour");
  if (abs < 7 * 86400) return rtf.format(Math.round(diff / 86400), "day");
  return new Date(ms).toLocaleDateString();
}

// --- conversations ------------------------------------------------------------------

function persist() {
  state.conversations.sort((a, b) => b.updatedAt - a.updatedAt);
  state.conversations = saveConversations(state.conversations);
  renderHistory();
}

function renderHistory() {
  const items = state.conversations.map((c) => {
    const open = h(
      "button",
      {
        type: "button",
        class: "history-open",
        "aria-current": state.current?.id === c.id ? "true" : null,
        onclick: () => openConversation(c.id),
      },
      h("span", { class: "history-title", text: c.title || "Untitled" }),
      h("span", { class: "history-time", text: relativeTime(c.updatedAt) }),
    );
    const del = h(
      "button",
      {
        type: "button",
        class: "icon-btn history-delete",
        "aria-label": `Delete “${c.title || "Untitled"}”`,
        onclick: () => deleteConversation(c.id),
      },
      icon(ICONS.trash),
    );
    return h("li", { class: state.current?.id === c.id ? "active" : null }, open, del);
  });
  el.history.replaceChildren(...items);
  el.historyEmpty.hidden = items.length > 0;
}

function showThread() {
  el.welcome.hidden = el.messages.childElementCount > 0;
  el.title.textContent = state.current?.title || "New chat";
  document.title = state.current ? `${state.current.title} · ragline` : "ragline";
}

function openConversation(id) {
  const conv = state.conversations.find((c) => c.id === id);
  if (!conv) return;
  stopStreaming();
  closePassage(false);
  state.current = conv;
  el.messages.replaceChildren(
    ...conv.messages.map((m) => (m.role === "user" ? userNode(m) : assistantNode(m).node)),
  );
  showThread();
  renderHistory();
  closeSidebar(false);
  scrollToEnd(true);
  el.question.focus();
}

function newChat() {
  stopStreaming();
  closePassage(false);
  state.current = null;
  el.messages.replaceChildren();
  showThread();
  renderHistory();
  closeSidebar(false);
  el.question.value = "";
  autosize();
  el.question.focus();
}

function deleteConversation(id) {
  if (state.current?.id === id) newChat();
  state.conversations = state.conversations.filter((c) => c.id !== id);
  persist();
  el.newChat.focus();
}

// --- messages -----------------------------------------------------------------------

function userNode(msg) {
  return h(
    "li",
    { class: "msg msg-user" },
    h("span", { class: "visually-hidden", text: "You asked:" }),
    h("div", { class: "bubble", text: msg.text }),
  );
}

/** A lookup for renderAnswer: the k-th [n] in the text gets the k-th citation of n
 * (while streaming) or the citation at that exact offset (final text). */
function citeLookup(msg) {
  const seen = new Map();
  const sources = new Map((msg.sources || []).map((s) => [s.number, s]));
  for (const c of msg.citations || []) {
    if (c.source && !sources.has(c.number)) sources.set(c.number, c.source);
  }
  return {
    citation(n, offset) {
      const all = (msg.citations || []).filter((c) => c.number === n);
      if (msg.state === "done") {
        const exact = all.find((c) => Array.isArray(c.span) && c.span[0] === offset);
        if (exact) return exact;
      }
      const k = seen.get(n) || 0;
      seen.set(n, k + 1);
      return all[k] || all[0] || null;
    },
    source: (n) => sources.get(n) || null,
  };
}

/** What a level means, in words a reader can act on; the scores behind it are one
 * click away ("details"), not in the sentence. */
const LEVEL_MEANING = {
  high: "The cited passages state the answer.",
  medium: "The passages support the answer in part: check the cited sources.",
  low: "The documents do not clearly answer this question.",
};

function confidenceNode(conf) {
  if (!conf || !conf.level) return null;
  const level = String(conf.level).toLowerCase();
  const score = typeof conf.score === "number" ? conf.score.toFixed(2) : null;
  const numbers = [score ? `score ${score}` : "", conf.reason || ""].filter(Boolean).join("; ");
  return h(
    "div",
    { class: "confidence" },
    h("span", {
      class: `badge badge-${level}`,
      "data-level": level,
      text: LEVEL_TEXT[level] || `${level} confidence`,
    }),
    h("span", { class: "confidence-reason", text: LEVEL_MEANING[level] || "" }),
    numbers
      ? h(
          "details",
          { class: "confidence-details" },
          h("summary", { text: "details" }),
          h("span", { class: "confidence-numbers", text: numbers }),
        )
      : null,
  );
}

/** A source's label as listed: title › section, never the server's path to the file. */
function sourceText(s) {
  return s.label || [s.title, s.section].filter(Boolean).join(" › ") || `Source ${s.number}`;
}

/** Sources with the same label (two passages of one section) as one row, in order of
 * their first number: [{label, items}]. */
export function groupSources(sources) {
  const groups = new Map();
  for (const s of sources) {
    const label = sourceText(s);
    if (!groups.has(label)) groups.set(label, { label, items: [] });
    groups.get(label).items.push(s);
  }
  return [...groups.values()];
}

function sourcesNode(msg, node) {
  const sources = msg.sources || [];
  if (!sources.length) return null;
  const listId = `sources-${msg.id}`;
  const list = h(
    "ul",
    { class: "sources-list", id: listId, hidden: true },
    ...groupSources(sources).map((g) =>
      h(
        "li",
        { class: "source-group" },
        ...g.items.map((s) =>
          h(
            "button",
            {
              type: "button",
              class: "source-item",
              "aria-label": `Source ${s.number}: ${g.label}`,
              onclick: (ev) => openPassage(msg, s.number, null, ev.currentTarget),
            },
            h("span", { class: "source-num", text: String(s.number) }),
          ),
        ),
        h("span", { class: "source-label", text: g.label }),
      ),
    ),
  );
  const toggle = h(
    "button",
    {
      type: "button",
      class: "chip sources-toggle",
      "aria-expanded": "false",
      "aria-controls": listId,
      onclick: () => {
        const open = list.hidden;
        list.hidden = !open;
        toggle.setAttribute("aria-expanded", String(open));
        if (open && node === el.messages.lastElementChild) scrollToEnd();
      },
    },
    `${sources.length} source${sources.length === 1 ? "" : "s"}`,
    icon(ICONS.chevron),
  );
  return { toggle, list };
}

function copyButton(msg) {
  if (!navigator.clipboard?.writeText) return null;
  const btn = h(
    "button",
    {
      type: "button",
      class: "icon-btn copy-btn",
      "aria-label": "Copy the answer",
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(msg.text);
          btn.replaceChildren(icon(ICONS.check));
          btn.setAttribute("aria-label", "Copied");
          setTimeout(() => {
            btn.replaceChildren(icon(ICONS.copy));
            btn.setAttribute("aria-label", "Copy the answer");
          }, 1500);
        } catch {
          announce("The browser did not allow copying.");
        }
      },
    },
    icon(ICONS.copy),
  );
  return btn;
}

/** POST feedback on the answer `msg` to `path` (api/feedback for a rating,
 * api/feedback/click for a citation opened). Feedback is a courtesy: a failure is
 * announced for a rating and ignored for a click. */
async function sendFeedback(msg, path, body) {
  if (!msg.queryId) return false;
  try {
    const res = await fetch(path, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ query_id: msg.queryId, ...body }),
    });
    return res.ok;
  } catch {
    return false;
  }
}

/** Thumbs up / down for a finished answer; the choice is kept with the conversation. */
function ratingButtons(msg) {
  if (!msg.queryId) return null;
  const group = h("div", { class: "rating", role: "group", "aria-label": "Was this answer helpful?" });
  for (const [value, label] of [["up", "Helpful"], ["down", "Not helpful"]]) {
    const btn = h(
      "button",
      {
        type: "button",
        class: "icon-btn rate-btn",
        "data-rating": value,
        "aria-label": label,
        "aria-pressed": msg.rating === value ? "true" : "false",
        onclick: async () => {
          if (msg.rating === value) return;
          if (!(await sendFeedback(msg, "api/feedback", { rating: value }))) {
            announce("Your rating could not be sent.");
            return;
          }
          msg.rating = value;
          persist();
          for (const b of group.querySelectorAll(".rate-btn")) {
            b.setAttribute("aria-pressed", b.dataset.rating === value ? "true" : "false");
          }
        },
      },
      icon(ICONS[value]),
    );
    group.append(btn);
  }
  return group;
}

/** Build (or rebuild) an assistant message's node from its data. */
function assistantNode(msg, node = h("li", { class: "msg msg-assistant" })) {
  node.className = "msg msg-assistant";
  node.dataset.state = msg.state;
  node.classList.toggle("is-fallback", Boolean(msg.fallback));
  node.setAttribute("aria-busy", msg.state === "streaming" ? "true" : "false");

  const parts = [h("span", { class: "visually-hidden", text: "Answer:" })];
  if (msg.fallback) {
    parts.push(
      h(
        "p",
        { class: "fallback-label" },
        icon(ICONS.info),
        "Not enough information in the documents",
      ),
    );
  }
  if (msg.state === "streaming" && !msg.text) {
    parts.push(h("p", { class: "thinking", text: "Searching the documents…" }));
  }
  const answer = h("div", { class: "answer" });
  renderAnswer(answer, msg.text || "", citeLookup(msg));
  parts.push(answer);

  if (msg.state === "stopped") {
    parts.push(h("p", { class: "msg-note", text: "Stopped before the answer was complete." }));
  }
  if (msg.state === "error") {
    const alert = h(
      "div",
      { class: "msg-error" },
      icon(ICONS.alert),
      h("span", { text: msg.error || "Something went wrong." }),
    );
    if (msg.errorCode === 401) {
      alert.append(
        h("button", { type: "button", class: "link-btn", onclick: openSettings }, "Set API key"),
      );
    }
    parts.push(alert);
  }

  if (msg.state === "done" && msg.suggestions?.length) {
    parts.push(
      h(
        "div",
        { class: "suggestions" },
        h("p", { class: "suggestions-title", text: "Try asking:" }),
        ...msg.suggestions.map((s) =>
          h("button", { type: "button", class: "chip", onclick: () => ask(s) }, s),
        ),
      ),
    );
  }

  if (msg.state !== "streaming") {
    const footer = h("div", { class: "msg-footer" });
    const conf = confidenceNode(msg.confidence);
    if (conf) footer.append(conf);
    const src = sourcesNode(msg, node);
    const tools = h("div", { class: "msg-tools" });
    if (src) tools.append(src.toggle);
    const meta = [msg.generator, msg.latencyMs ? `${(msg.latencyMs / 1000).toFixed(1)} s` : ""]
      .filter(Boolean)
      .join(" · ");
    if (meta) tools.append(h("span", { class: "msg-meta", text: meta }));
    if (msg.text) tools.append(copyButton(msg) || "");
    if (msg.state === "done") tools.append(ratingButtons(msg) || "");
    footer.append(tools);
    if (footer.childElementCount) parts.push(footer);
    if (src) parts.push(src.list);
  }

  node.replaceChildren(h("div", { class: "avatar", "aria-hidden": "true" }), h("div", { class: "msg-body" }, ...parts));
  return { node, msg };
}

// --- the passage panel ----------------------------------------------------------------

function citationsFor(msg, n) {
  return (msg.citations || []).filter((c) => c.number === n);
}

function openPassage(msg, n, offset, trigger) {
  sendFeedback(msg, "api/feedback/click", { citation: n }); // for the click rate; not awaited
  const lookup = citeLookup(msg);
  let cit = null;
  if (offset !== null) {
    // Same walk as rendering: count the markers of n before this one.
    const markers = [...trigger.closest(".answer").querySelectorAll(`.cite[data-n="${n}"]`)];
    const k = Math.max(0, markers.indexOf(trigger));
    cit =
      (msg.state === "done" &&
        citationsFor(msg, n).find((c) => Array.isArray(c.span) && c.span[0] === offset)) ||
      citationsFor(msg, n)[k] ||
      citationsFor(msg, n)[0] ||
      null;
  } else {
    cit = citationsFor(msg, n)[0] || null;
  }
  const src = lookup.source(n);
  const title = cit?.title || src?.title || "";
  const section = cit?.section || src?.section || "";
  const docId = cit?.doc_id || src?.doc_id || "";
  // The original page when it has a web address; otherwise the document's text as
  // ragline serves it. The server's path to the file is never shown.
  const href =
    sourceHref(cit?.url || src?.url, cit?.anchor || src?.anchor) ||
    (docId ? `api/documents/${encodeURIComponent(docId)}/text` : null);

  el.passageKicker.textContent = `Source ${n}`;
  const heading = h("h2", { class: "passage-title", id: "passage-heading" });
  heading.append(h("span", { class: "crumb-title", text: title || `Source ${n}` }));
  if (section && section !== title) {
    heading.append(h("span", { class: "crumb-sep", "aria-hidden": "true", text: " › " }));
    heading.append(h("span", { class: "visually-hidden", text: ", section " }));
    heading.append(h("span", { class: "crumb-section", text: section }));
  }
  const body = [heading];

  if (cit?.support_text) {
    body.push(
      h(
        "figure",
        { class: "passage-quote" },
        (() => {
          const quote = h("blockquote", { class: "passage-text" });
          renderAnswer(quote, unwrap(cit.support_text), null);
          return quote;
        })(),
        h("figcaption", {
          text:
            typeof cit.support_score === "number"
              ? `Supporting passage · match ${cit.support_score.toFixed(2)}`
              : "Supporting passage",
        }),
      ),
    );
    if (cit.supported === false) {
      body.push(
        h(
          "p",
          { class: "passage-warning" },
          icon(ICONS.alert),
          "The check could not confirm that this passage supports the sentence.",
        ),
      );
    }
    if (cit.claim) {
      body.push(
        h(
          "div",
          { class: "passage-claim" },
          h("h3", { text: "Cited for" }),
          (() => {
            const claim = h("div", { class: "passage-claim-text" });
            renderAnswer(claim, cit.claim, null);
            return claim;
          })(),
        ),
      );
    }
  } else {
    body.push(
      h("p", {
        class: "passage-text passage-muted",
        text: "This source was retrieved for the answer; no sentence quotes it.",
      }),
    );
  }
  const facts = [];
  if (src?.heading_path?.length > 1) facts.push(["Location", src.heading_path.join(" › ")]);
  if (typeof src?.vector_score === "number") {
    facts.push(["Similarity", src.vector_score.toFixed(2)]);
  }
  if (facts.length) {
    body.push(
      h(
        "dl",
        { class: "passage-facts" },
        ...facts.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]),
      ),
    );
  }
  if (href) {
    body.push(
      h(
        "a",
        {
          class: "passage-link",
          href,
          target: "_blank",
          rel: "noopener noreferrer",
          onclick: href.startsWith("api/") ? (ev) => openWithKey(ev, href) : null,
        },
        href.startsWith("api/") ? "Open the document" : "Open the source",
        icon(ICONS.link),
      ),
    );
  }
  el.passageBody.replaceChildren(...body);

  for (const b of document.querySelectorAll(".cite.active, .source-item.active")) {
    b.classList.remove("active");
  }
  trigger?.classList.add("active");
  state.passageReturn = trigger || null;
  el.passage.hidden = false;
  el.app.classList.add("has-passage");
  el.passage.scrollTop = 0;
  el.passage.focus({ preventScroll: true });
}

/** A link into ragline's API opened in a new tab: with an API key set, a plain link
 * would not send it (401), so the text is fetched with the key and shown from a blob. */
async function openWithKey(ev, href) {
  if (!loadApiKey()) return; // the browser follows the link itself
  ev.preventDefault();
  const tab = window.open("", "_blank");
  try {
    const res = await fetch(href, { headers: headers() });
    if (!res.ok) throw new Error(describeError(await httpError(res)));
    const blob = new Blob([await res.text()], { type: "text/plain;charset=utf-8" });
    if (tab) tab.location.href = URL.createObjectURL(blob);
  } catch (err) {
    tab?.close();
    announce(`The document could not be opened: ${err?.message || err}`);
  }
}

function closePassage(restoreFocus = true) {
  if (el.passage.hidden) return;
  el.passage.hidden = true;
  el.app.classList.remove("has-passage");
  for (const b of document.querySelectorAll(".cite.active, .source-item.active")) {
    b.classList.remove("active");
  }
  const back = state.passageReturn;
  state.passageReturn = null;
  if (restoreFocus && back?.isConnected) back.focus();
}

// --- asking -------------------------------------------------------------------------

function headers() {
  const out = { "Content-Type": "application/json", Accept: "text/event-stream" };
  const key = loadApiKey();
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

/** An HTTP error response as {status, code, message, retryAfter}. */
async function httpError(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  const header = Number.parseFloat(res.headers.get("Retry-After") || "");
  return {
    status: res.status,
    code: body?.error || `http_${res.status}`,
    message: body?.message || body?.detail || res.statusText || `HTTP ${res.status}`,
    retryAfter: Number.isFinite(header) ? header : null,
  };
}

function describeError(err) {
  if (err.status === 429) {
    const secs = err.retryAfter !== null ? Math.max(1, Math.ceil(err.retryAfter)) : null;
    const when = secs !== null ? `in ${secs} s` : "in a minute";
    // a local user hits the default 10 a minute quickly: say which setting raises it
    return (
      `Too many questions in a short time. Try again ${when}. ` +
      "The server's RAGLINE_RATE_LIMIT_PER_MINUTE setting raises the limit (0 turns it off)."
    );
  }
  if (err.status === 401) {
    return `${err.message} This server needs an API key.`;
  }
  return err.message;
}

function startRetryCountdown(seconds) {
  state.retryUntil = Date.now() + seconds * 1000;
  clearInterval(state.retryTimer);
  const tick = () => {
    const left = Math.ceil((state.retryUntil - Date.now()) / 1000);
    if (left <= 0) {
      clearInterval(state.retryTimer);
      state.retryUntil = 0;
      announce("");
      updateComposer();
      return;
    }
    announce(`Rate limit reached: you can ask again in ${left} s.`);
    updateComposer();
  };
  tick();
  state.retryTimer = setInterval(tick, 1000);
}

function updateComposer() {
  const busy = Boolean(state.streaming);
  el.send.hidden = busy;
  el.stop.hidden = !busy;
  el.send.disabled = state.retryUntil > Date.now();
  el.composer.classList.toggle("is-busy", busy);
}

function stopStreaming() {
  state.streaming?.controller.abort();
}

async function ask(text) {
  const question = text.replace(/\s+/g, " ").trim();
  if (state.streaming) return;
  if (question.length < MIN_QUESTION) {
    announce(`A question needs at least ${MIN_QUESTION} characters.`);
    return;
  }
  if (question.length > MAX_QUESTION) {
    announce(
      `A question can have at most ${MAX_QUESTION} characters; this one has ` +
        `${question.length}. Shorten it and send again.`,
    );
    return;
  }
  if (state.retryUntil > Date.now()) return;
  announce("");

  if (!state.current) {
    const now = Date.now();
    state.current = {
      id: newId(),
      serverId: null,
      title: question.length > 80 ? `${question.slice(0, 79)}…` : question,
      createdAt: now,
      updatedAt: now,
      messages: [],
    };
    state.conversations.unshift(state.current);
  }
  const conv = state.current;
  const userMsg = { role: "user", text: question };
  conv.messages.push(userMsg);
  el.messages.append(userNode(userMsg));

  const msg = {
    role: "assistant",
    id: newId(),
    state: "streaming",
    text: "",
    citations: [],
    sources: [],
  };
  conv.messages.push(msg);
  const { node } = assistantNode(msg);
  el.messages.append(node);
  showThread();
  conv.updatedAt = Date.now();
  persist();
  scrollToEnd(true);

  const controller = new AbortController();
  state.streaming = { controller, msg, node };
  updateComposer();
  el.question.value = "";
  autosize();

  const repaint = () => {
    assistantNode(msg, node);
    scrollToEnd();
  };

  try {
    await streamAnswer(conv, question, msg, controller.signal, repaint);
  } catch (err) {
    if (controller.signal.aborted) {
      msg.state = "stopped";
    } else {
      msg.state = "error";
      msg.error =
        err?.name === "TypeError"
          ? "Could not reach the server. Check your connection and try again."
          : String(err?.message || err);
    }
  } finally {
    if (msg.state === "streaming") {
      msg.state = "error";
      msg.error = "The connection closed before the answer was complete.";
    }
    state.streaming = null;
    repaint();
    conv.updatedAt = Date.now();
    persist();
    updateComposer();
    if (document.activeElement === document.body || document.activeElement === el.stop) {
      el.question.focus();
    }
  }
}

/** POST the question and apply the SSE events to `msg` until `done` or `error`. */
async function streamAnswer(conv, question, msg, signal, repaint) {
  const body = { question };
  if (conv.serverId) body.conversation_id = conv.serverId;
  let res = await fetch("api/chat", {
    method: "POST",
    headers: headers(),
    body: JSON.stringify(body),
    signal,
  });
  if (res.status === 404 && conv.serverId) {
    // The server no longer knows this conversation (new index, other server):
    // go on as a new one rather than fail.
    conv.serverId = null;
    delete body.conversation_id;
    res = await fetch("api/chat", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(body),
      signal,
    });
  }
  if (!res.ok) {
    const err = await httpError(res);
    msg.state = "error";
    msg.errorCode = err.status;
    msg.error = describeError(err);
    if (err.status === 429) startRetryCountdown(err.retryAfter ?? 60);
    return;
  }
  const type = res.headers.get("Content-Type") || "";
  if (!type.includes("text/event-stream") || !res.body) {
    msg.state = "error";
    msg.error = "The server answered with something other than an event stream.";
    return;
  }

  for await (const raw of readEvents(res.body)) {
    const { event, data } = parseData(raw);
    if (event === "token") {
      msg.text += data.text || "";
    } else if (event === "citation") {
      msg.citations.push(data);
    } else if (event === "error") {
      msg.state = "error";
      msg.errorCode = data.status_code;
      msg.error = data.message || data.error || "The answer failed.";
      repaint();
      return;
    } else if (event === "done") {
      applyDone(conv, msg, data);
      return;
    } else {
      continue; // an event this page does not know: ignore, as SSE clients do
    }
    repaint();
  }
}

function applyDone(conv, msg, data) {
  const answer = data.answer || {};
  const meta = answer.metadata || {};
  if (data.conversation_id) conv.serverId = data.conversation_id;
  if (typeof answer.answer === "string") msg.text = answer.answer;
  msg.citations = Array.isArray(answer.citations) ? answer.citations : msg.citations;
  msg.sources = Array.isArray(answer.sources) ? answer.sources : [];
  msg.confidence = answer.confidence || null;
  msg.fallback = Boolean(meta.fallback);
  msg.suggestions = Array.isArray(meta.suggestions) ? meta.suggestions : [];
  msg.generator = meta.generator || "";
  msg.latencyMs = typeof data.latency_ms === "number" ? data.latency_ms : null;
  msg.serverMessageId = data.message_id || null;
  msg.queryId = data.query_id || null;
  if (meta.complete === false && meta.error) {
    msg.state = "error";
    msg.error = `The answer is incomplete: ${meta.error}`;
  } else {
    msg.state = "done";
  }
}

// --- layout: sidebar drawer, settings, composer -------------------------------------

function openSidebar() {
  el.app.classList.add("sidebar-open");
  el.scrim.hidden = false;
  el.menuBtn.setAttribute("aria-expanded", "true");
  el.newChat.focus();
}

function closeSidebar(restoreFocus = true) {
  if (!el.app.classList.contains("sidebar-open")) return;
  el.app.classList.remove("sidebar-open");
  el.scrim.hidden = true;
  el.menuBtn.setAttribute("aria-expanded", "false");
  if (restoreFocus) el.menuBtn.focus();
}

function renderKeyState() {
  const set = Boolean(loadApiKey());
  el.keyState.textContent = set ? "set" : "not set";
  el.keyState.classList.toggle("on", set);
}

function openSettings() {
  el.apiKey.value = loadApiKey();
  el.settings.showModal();
  el.apiKey.focus();
}

function autosize() {
  el.question.style.height = "auto";
  el.question.style.height = `${Math.min(el.question.scrollHeight, 200)}px`;
}

function wire() {
  el.composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ask(el.question.value);
  });
  el.question.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      if (!state.streaming) ask(el.question.value);
    }
  });
  el.question.addEventListener("input", autosize);
  el.stop.addEventListener("click", () => {
    stopStreaming();
    el.question.focus();
  });

  // Citation markers are re-created on every repaint: one delegated listener.
  el.messages.addEventListener("click", (ev) => {
    const btn = ev.target.closest(".cite");
    if (!btn) return;
    const li = btn.closest(".msg-assistant");
    const conv = state.current;
    const idx = [...el.messages.children].indexOf(li);
    const msg = state.streaming?.node === li ? state.streaming.msg : conv?.messages[idx];
    if (!msg) return;
    openPassage(msg, Number(btn.dataset.n), Number(btn.dataset.offset), btn);
  });

  el.passageClose.addEventListener("click", () => closePassage());
  el.newChat.addEventListener("click", newChat);
  el.topbarNew.addEventListener("click", newChat);
  el.menuBtn.addEventListener("click", openSidebar);
  el.sidebarClose.addEventListener("click", () => closeSidebar());
  el.scrim.addEventListener("click", () => closeSidebar());
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || el.settings.open) return;
    if (!el.passage.hidden) closePassage();
    else if (el.app.classList.contains("sidebar-open")) closeSidebar();
  });

  el.openSettings.addEventListener("click", openSettings);
  el.keyCancel.addEventListener("click", () => el.settings.close());
  el.keyClear.addEventListener("click", () => {
    saveApiKey("");
    el.apiKey.value = "";
    renderKeyState();
    el.settings.close();
  });
  el.settings.addEventListener("close", () => {
    if (el.settings.returnValue === "save") {
      saveApiKey(el.apiKey.value.trim());
      renderKeyState();
    }
    el.settings.returnValue = "";
    el.openSettings.focus();
  });
  window.addEventListener("resize", () => {
    if (!isNarrow()) closeSidebar(false);
  });
}

wire();
renderKeyState();
renderHistory();
showThread();
updateComposer();
el.question.focus();
