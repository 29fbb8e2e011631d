// Browser-side memory: past conversations and the API key, in localStorage. The
// server keeps the history the generator sees; this copy is what the list shows.

const CONVERSATIONS = "ragline.conversations.v1";
const API_KEY = "ragline.apiKey";
const MAX_CONVERSATIONS = 50;

function safeGet(key) {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return null; // storage disabled (private mode, policy): work without memory
  }
}

function safeSet(key, value) {
  try {
    window.localStorage.setItem(key, value);
    return true;
  } catch {
    return false;
  }
}

/** A local id; crypto.randomUUID exists only in secure contexts (not plain http on a LAN). */
export function newId() {
  if (window.crypto?.randomUUID) return window.crypto.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/** All stored conversations, newest first; unreadable data counts as none. */
export function loadConversations() {
  const raw = safeGet(CONVERSATIONS);
  if (!raw) return [];
  try {
    const list = JSON.parse(raw);
    if (!Array.isArray(list)) return [];
    return list
      .filter((c) => c && typeof c.id === "string" && Array.isArray(c.messages))
      .sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
  } catch {
    return [];
  }
}

/**
 * Save the list (newest first), keeping at most MAX_CONVERSATIONS; when the browser's
 * quota is full, the oldest conversations are dropped until it fits.
 */
export function saveConversations(list) {
  let kept = list.slice(0, MAX_CONVERSATIONS);
  while (kept.length > 0 && !safeSet(CONVERSATIONS, JSON.stringify(kept))) {
    kept = kept.slice(0, -1);
  }
  if (kept.length === 0) safeSet(CONVERSATIONS, "[]");
  return kept;
}

export function loadApiKey() {
  return safeGet(API_KEY) || "";
}

export function saveApiKey(key) {
  if (key) return safeSet(API_KEY, key);
  try {
    window.localStorage.removeItem(API_KEY);
  } catch {
    return false;
  }
  return true;
}
