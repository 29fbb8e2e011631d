// Server-sent events over fetch: EventSource cannot POST a JSON body, send headers
// or be aborted mid-answer, so the chat reads the response body itself.

/**
 * An incremental text/event-stream parser (WHATWG HTML §9.2.6): feed it text in
 * chunks of any size; it calls onEvent({event, data, id}) for every dispatched event.
 * @param {(ev: {event: string, data: string, id: string}) => void} onEvent
 */
export function createSSEParser(onEvent) {
  let buffer = "";
  let event = "";
  let data = [];
  let lastId = "";
  let hasData = false;

  function line(text) {
    if (text === "") {
      if (hasData) onEvent({ event: event || "message", data: data.join("\n"), id: lastId });
      event = "";
      data = [];
      hasData = false;
      return;
    }
    if (text.startsWith(":")) return; // comment / keep-alive
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") {
      data.push(value);
      hasData = true;
    } else if (field === "id" && !value.includes("\0")) lastId = value;
  }

  return {
    /** Parse a chunk; a trailing partial line waits for the next one. */
    push(chunk) {
      buffer += chunk;
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i];
        if (c !== "\n" && c !== "\r") continue;
        // A lone \r at the very end may be the first half of \r\n: wait for more.
        if (c === "\r" && i === buffer.length - 1) break;
        line(buffer.slice(start, i));
        if (c === "\r" && buffer[i + 1] === "\n") i++;
        start = i + 1;
      }
      buffer = buffer.slice(start);
    },
    /** End of stream: an unterminated final event is discarded, as the spec says. */
    end() {
      if (buffer.endsWith("\r")) line(buffer.slice(0, -1));
      buffer = "";
      event = "";
      data = [];
      hasData = false;
    },
  };
}

/**
 * Yield the events of a fetch Response body as they arrive. Aborting the fetch's
 * AbortController rejects the pending read with an AbortError.
 * @param {ReadableStream<Uint8Array>} body
 */
export async function* readEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  const queue = [];
  const parser = createSSEParser((ev) => queue.push(ev));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        parser.push(decoder.decode());
        parser.end();
        yield* queue.splice(0);
        return;
      }
      parser.push(decoder.decode(value, { stream: true }));
      // One network read can hold several events: hand them over one at a time so
      // the page paints each token as its own update.
      while (queue.length) yield queue.shift();
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Parse an event's JSON data; a malformed payload becomes an `error` event so the
 * caller shows it instead of failing silently.
 */
export function parseData(ev) {
  try {
    return { event: ev.event, data: JSON.parse(ev.data) };
  } catch {
    return {
      event: "error",
      data: { error: "bad_event", message: `The server sent an unreadable ${ev.event} event.` },
    };
  }
}
