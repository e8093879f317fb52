// mirai's page, shared by every tab of one browser (a SharedWorker): it holds
// the one change stream (GET /events) the tabs share, relays each event to
// every tab, and keeps the tokens a person typed (or got by signing in, with
// the mark that says so) in memory so a new tab does not ask again. Nothing is written to storage; the worker, its stream and
// the tokens end when the last tab of mirai closes.
"use strict";

const RETRY_MS = 1500;
const ports = new Set();
const tokens = { "mirai.token": null, "mirai.reviewer": null, "mirai.signedin": null };
let lastId = null;
let open = false;
let running = null; // the AbortController of the stream being read
let waitingForToken = false;

function tell(message, only) {
  for (const port of only ? [only] : ports) {
    try { port.postMessage(message); } catch (_) { ports.delete(port); }
  }
}

self.onconnect = (event) => {
  const port = event.ports[0];
  ports.add(port);
  port.onmessage = (m) => heard(port, m.data || {});
  port.start();
};

function heard(port, message) {
  switch (message.type) {
    case "hello":
      for (const kind of Object.keys(tokens)) {
        if (!tokens[kind] && message.tokens && message.tokens[kind]) tokens[kind] = message.tokens[kind];
      }
      tell({ type: "tokens", tokens }, port);
      tell({ type: open ? "open" : "closed" }, port);
      if (!running) stream();
      break;
    case "token":
      if (!(message.kind in tokens)) return;
      tokens[message.kind] = message.value || null;
      tell({ type: "tokens", tokens });
      if (waitingForToken && message.kind === "mirai.token") { waitingForToken = false; stream(); }
      break;
    case "bye":
      ports.delete(port);
      // The last tab gone: the stream is given back to the server now.
      if (!ports.size && running) { running.abort(); running = null; open = false; }
      break;
    default:
      break;
  }
}

/** Reads GET /events until it ends, then tries again (while any tab listens). */
async function stream() {
  if (running || !ports.size) return;
  const controller = new AbortController();
  running = controller;
  const headers = { Accept: "text/event-stream" };
  const token = tokens["mirai.token"] || tokens["mirai.reviewer"];
  if (token) headers.Authorization = "Bearer " + token;
  if (lastId) headers["Last-Event-ID"] = lastId;
  try {
    const res = await fetch("/events", { headers, credentials: "omit", cache: "no-store", signal: controller.signal });
    if (res.status === 401) {
      running = null;
      waitingForToken = true;
      tell({ type: "closed", why: "unauthorized" });
      return;
    }
    if (res.status !== 200 || !res.body) {
      // No stream here (404 on a mirai without one, 503 past the server's streams): tabs poll.
      running = null;
      tell({ type: "closed", why: "status " + res.status });
      setTimeout(stream, RETRY_MS * 10);
      return;
    }
    open = true;
    tell({ type: "open" });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        let type = "message", id = null, data = "";
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (id) lastId = id;
        if (block.split(/\r?\n/).every((l) => l.startsWith(":"))) continue;
        let parsed = null;
        try { parsed = data ? JSON.parse(data) : null; } catch (_) { parsed = null; }
        tell({ type: "event", event: type, data: parsed });
      }
    }
  } catch (_) { /* ended or aborted: below */ }
  if (running !== controller) return; // aborted by the last tab leaving
  running = null;
  open = false;
  tell({ type: "closed", why: "ended" });
  setTimeout(stream, RETRY_MS);
}
