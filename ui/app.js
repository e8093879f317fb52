// mirai's page: plain JavaScript, no framework, no build step.
// Every note, run and proposal comes from the HTTP API with the token kept in
// this tab's sessionStorage, sent in the Authorization header (never a cookie).
// Text from the API is put into the page as text; the one HTML it inserts is a
// note rendered and sanitized by the server (notes.render).
"use strict";

const TOKEN = "mirai.token";
const REVIEWER = "mirai.reviewer";
const PAGE = 10; // search results per page
const POLL_MS = 1500;

const main = document.getElementById("main");
const live = document.getElementById("live");

// ---------- small helpers ----------

/** An element: h("a", {href: "/x", class: "y"}, "text", child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A note path as a page address: each segment percent-encoded. */
function enc(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

function noteHref(path) { return "/ui/notes/" + enc(path); }

function short(commit) { return commit ? commit.slice(0, 10) : "—"; }

function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function say(text) { live.textContent = text; }

class ApiError extends Error {
  constructor(status, code, message) {
    super(message || "request failed (" + status + ")");
    this.status = status;
    this.code = code;
  }
}

// ---------- tokens ----------

const dialog = document.getElementById("token-dialog");
let asking = null;

/** Asks for a token (kind TOKEN or REVIEWER); resolves once one is typed, rejects on cancel. */
function askToken(kind, why) {
  if (asking) return asking;
  asking = new Promise((resolve, reject) => {
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    document.getElementById("token-title").textContent =
      kind === REVIEWER ? "Reviewer token needed" : "Token needed";
    document.getElementById("token-why").textContent = why ||
      (kind === REVIEWER ? "Approving and rejecting proposals needs MIRAI_REVIEWER_TOKEN."
                         : "This mirai needs its MIRAI_API_TOKEN.");
    input.value = "";
    const done = (ok) => {
      form.removeEventListener("submit", submit);
      cancel.removeEventListener("click", cancelled);
      dialog.removeEventListener("cancel", cancelled);
      if (dialog.open) dialog.close();
      asking = null;
      ok ? resolve() : reject(new ApiError(401, "unauthorized", "no token given"));
    };
    const submit = (event) => {
      event.preventDefault();
      if (!input.value.trim()) return;
      sessionStorage.setItem(kind, input.value.trim());
      done(true);
    };
    const cancel = document.getElementById("token-cancel");
    const cancelled = (event) => { event.preventDefault(); done(false); };
    form.addEventListener("submit", submit);
    cancel.addEventListener("click", cancelled);
    dialog.addEventListener("cancel", cancelled);
    dialog.showModal();
    input.focus();
  });
  return asking;
}

function authHeaders(kind, extra) {
  const headers = Object.assign({ Accept: "application/json" }, extra || {});
  const token = sessionStorage.getItem(kind) || (kind === REVIEWER ? null : sessionStorage.getItem(REVIEWER));
  if (token) headers.Authorization = "Bearer " + token;
  return headers;
}

/**
 * One API call. `opts.body` is sent as JSON; `opts.reviewer` sends the
 * reviewer token. A 401 asks for the token and tries again.
 */
async function api(path, opts = {}) {
  const kind = opts.reviewer ? REVIEWER : TOKEN;
  for (;;) {
    const init = {
      method: opts.method || (opts.body === undefined ? "GET" : "POST"),
      headers: authHeaders(kind, opts.body === undefined ? {} : { "Content-Type": "application/json" }),
      credentials: "omit",
      cache: "no-store",
    };
    if (opts.body !== undefined) init.body = JSON.stringify(opts.body);
    const res = await fetch(path, init);
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    const error = data && data.error ? data.error : {};
    const wrongToken = res.status === 401 || (opts.reviewer && res.status === 403 && error.code === "policy_denied");
    if (wrongToken) {
      sessionStorage.removeItem(kind);
      await askToken(kind, error.message);
      continue;
    }
    if (!res.ok) throw new ApiError(res.status, error.code, error.message);
    return { status: res.status, data };
  }
}

function q(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") search.set(k, v);
  return search.toString();
}

// ---------- diffs ----------

function diffClass(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) return "head";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}

/** A unified diff, coloured; and side by side where the view offers it. */
function diffView(text, sideBySide) {
  const lines = (text || "").replace(/\n$/, "").split("\n");
  const unified = h("div", { class: "diff unified", role: "group", "aria-label": "Unified diff" },
    lines.map((line) => h("span", { class: "l " + diffClass(line) }, line)));
  if (!sideBySide) return unified;
  const rows = [];
  let dels = [], adds = [];
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i++) {
      rows.push(h("tr", {},
        h("td", { class: dels[i] !== undefined ? "del" : "" }, cell(dels[i])),
        h("td", { class: adds[i] !== undefined ? "add" : "" }, cell(adds[i]))));
    }
    dels = []; adds = [];
  };
  for (const line of lines) {
    const kind = diffClass(line);
    if (kind === "head") continue;
    if (kind === "hunk") { flush(); rows.push(h("tr", { class: "hunk" }, h("td", { colspan: 2 }, line))); }
    else if (kind === "del") dels.push(line.slice(1));
    else if (kind === "add") adds.push(line.slice(1));
    else { flush(); const t = cell(line.slice(1)); rows.push(h("tr", {}, h("td", {}, t), h("td", {}, t))); }
  }
  flush();
  return h("div", {}, unified,
    h("div", { class: "diff" }, h("table", { class: "split", "aria-label": "Side-by-side diff" }, h("tbody", {}, rows))));
}

/** A side-by-side cell's text: a blank line keeps its height. */
function cell(text) { return text ? text : "\u00a0"; }

/** A call's request or answer: indented when it is whole JSON, else as kept (cut). */
function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text || ""; }
}

// ---------- routing ----------

let current = null; // {key, route, data}
/** What an action said, by what it acted on: kept across the redraw live updates make. */
const notices = new Map();

function notice(key, make) {
  const box = h("div", { role: "status", class: "result" });
  const fill = () => { const made = notices.get(key); box.replaceChildren(...(made ? [made()] : [])); };
  fill();
  return { box, set(made) { notices.set(key, made); fill(); } };
}

function parseRoute(url) {
  const path = url.pathname;
  const rest = (prefix) => decodeURIComponent(path.slice(prefix.length));
  if (path === "/" || path === "/ui" || path === "/ui/") return { name: "notes", path: "" };
  if (path === "/ui/notes" || path === "/ui/notes/") return { name: "notes", path: "" };
  if (path.startsWith("/ui/notes/")) return { name: "notes", path: path.slice(10).split("/").map(decodeURIComponent).join("/") };
  if (path.startsWith("/ui/history/")) return { name: "history", path: path.slice(12).split("/").map(decodeURIComponent).join("/") };
  if (path === "/ui/search") return { name: "search", q: url.searchParams.get("q") || "", offset: Number(url.searchParams.get("offset")) || 0 };
  if (path === "/ui/runs" || path === "/ui/runs/") return { name: "runs" };
  if (path.startsWith("/ui/runs/")) return { name: "run", id: rest("/ui/runs/") };
  if (path === "/ui/proposals" || path === "/ui/proposals/") return { name: "proposals" };
  if (path.startsWith("/ui/proposals/")) return { name: "proposal", id: rest("/ui/proposals/") };
  if (path === "/ui/status") return { name: "status" };
  return { name: "missing" };
}

function go(href, replace) {
  const url = new URL(href, location.origin);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  show(false);
}

document.addEventListener("click", (event) => {
  const a = event.target.closest && event.target.closest("a[href]");
  if (!a || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  const url = new URL(a.getAttribute("href"), location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/")) return;
  event.preventDefault();
  go(url.pathname + url.search + url.hash);
});

window.addEventListener("popstate", () => show(false));

document.getElementById("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const words = document.getElementById("search-input").value.trim();
  if (words) go("/ui/search?" + q({ q: words }));
});

function markNav(name) {
  const section = { notes: "notes", history: "notes", runs: "runs", run: "runs", proposals: "proposals", proposal: "proposals", status: "status" }[name];
  for (const a of document.querySelectorAll(".top nav a")) {
    if (a.dataset.view === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

/** Shows the view the address names. `refresh`: redraw only if its data changed. */
async function show(refresh) {
  if (location.pathname === "/") history.replaceState(null, "", "/ui/notes/");
  const route = parseRoute(new URL(location.href));
  const view = VIEWS[route.name];
  const key = location.pathname + location.search;
  markNav(route.name);
  if (route.name === "search") document.getElementById("search-input").value = route.q;
  if (!refresh) {
    say("");
    current = { key, route, data: null };
    document.title = view.title(route) + " · mirai";
  } else if (!current || current.key !== key) return;
  let data;
  try {
    data = await view.load(route);
  } catch (err) {
    if (refresh) return;
    if (current.key !== key) return;
    main.replaceChildren(h("h1", {}, view.title(route)), h("p", { class: "error" }, err.message));
    return;
  }
  if (!current || current.key !== key) return;
  const fingerprint = JSON.stringify(data);
  if (refresh && current.data === fingerprint) return;
  current.data = fingerprint;
  const y = window.scrollY;
  main.replaceChildren(view.draw(data, route));
  if (view.title.length && data) document.title = view.title(route, data) + " · mirai";
  if (refresh) window.scrollTo(0, y);
  else {
    main.focus({ preventScroll: true });
    if (view.after) view.after(data, route); else window.scrollTo(0, 0);
  }
  startLive();
}

// ---------- views ----------

const openFolders = new Set([""]);
const folderCache = new Map();

async function folder(prefix) {
  if (!folderCache.has(prefix)) {
    const { data } = await api("/mcp/notes?" + q({ folders: "true", prefix }));
    folderCache.set(prefix, data);
  }
  return folderCache.get(prefix);
}

const SHOWN = 300;

/** One folder's level of the tree: folders lazily, notes as links. */
function folderList(data, selected) {
  const items = [];
  for (const f of data.folders || []) {
    const name = f.path.replace(/\/$/, "").split("/").pop();
    const details = h("details", { "data-prefix": f.path },
      h("summary", {}, name + "/", h("span", { class: "count" }, String(f.notes))));
    if (openFolders.has(f.path)) details.open = true;
    details.addEventListener("toggle", async () => {
      if (!details.open) { openFolders.delete(f.path); return; }
      openFolders.add(f.path);
      if (details.querySelector("ul")) return;
      try {
        details.append(folderList(await folder(f.path), selected));
      } catch (err) { details.append(h("p", { class: "error" }, err.message)); }
    });
    if (details.open && folderCache.has(f.path)) details.append(folderList(folderCache.get(f.path), selected));
    else if (details.open) details.dispatchEvent(new Event("toggle"));
    items.push(h("li", {}, details));
  }
  const notes = data.notes || [];
  const listNote = (path) => h("li", {}, h("a", { href: noteHref(path), "aria-current": path === selected ? "page" : null },
    path.split("/").pop()));
  notes.slice(0, SHOWN).forEach((path) => items.push(listNote(path)));
  if (notes.length > SHOWN) {
    const more = h("li", {}, h("button", { type: "button", onclick: () => {
      more.replaceWith(...notes.slice(SHOWN).map(listNote));
    } }, "Show all " + notes.length + " notes"));
    items.push(more);
  }
  return h("ul", {}, items);
}

function tree(root, selected) {
  const wide = window.matchMedia("(min-width: 56rem)").matches;
  return h("details", { class: "tree", open: wide || !selected, "aria-label": "Folders and notes" },
    h("summary", {}, "Folders"), folderList(root, selected));
}

function frontMatter(fm) {
  if (!fm || !Object.keys(fm).length) return null;
  return h("table", { class: "fm", "aria-label": "Front matter" }, h("tbody", {},
    Object.entries(fm).map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k),
      h("td", {}, typeof v === "string" ? v : Array.isArray(v) && v.every((x) => typeof x !== "object") ? v.join(", ") : JSON.stringify(v))))));
}

let showSource = false;

const VIEWS = {
  notes: {
    title: (r, d) => r.path ? "Note: " + ((d && d.note && d.note.title) || r.path) : "Notes",
    async load(r) {
      if (r.refreshTree) folderCache.clear();
      const root = await folder("");
      let note = null, source = null;
      if (r.path) {
        note = (await api("/mcp/notes/render?" + q({ path: r.path }))).data;
        if (showSource) source = (await api("/mcp/notes/read?" + q({ path: r.path }))).data.content;
      }
      return { root, note, source };
    },
    draw(d, r) {
      const side = tree(d.root, r.path);
      if (!d.note) {
        const total = (d.root.notes || []).length + (d.root.folders || []).reduce((n, f) => n + f.notes, 0);
        return h("div", { class: "notes" }, side, h("section", {},
          h("h1", {}, "Notes"), h("p", { class: "muted" }, total + " notes. Choose one, or search above.")));
      }
      const n = d.note;
      const toggle = h("button", { type: "button", "aria-pressed": showSource ? "true" : "false",
        onclick: () => { showSource = !showSource; show(false); } }, showSource ? "Rendered" : "Source");
      const body = showSource
        ? h("pre", { class: "source", "aria-label": "Markdown source" }, d.source)
        : h("article", { class: "note" });
      if (!showSource) body.innerHTML = n.html; // sanitized by the server (notes.render)
      return h("div", { class: "notes" }, side, h("section", {},
        h("div", { class: "note-head" }, h("div", {}, h("h1", {}, n.title), h("div", { class: "path" }, n.path)),
          h("div", { class: "actions" }, toggle, h("a", { class: "button", href: "/ui/history/" + enc(n.path) }, "History"))),
        n.front_matter_error ? h("p", { class: "error" }, "Front matter: " + n.front_matter_error) : null,
        frontMatter(n.front_matter),
        body,
        h("p", { class: "muted" }, n.line_count + " lines, " + n.bytes + " bytes")));
    },
    after(d) {
      const hash = decodeURIComponent(location.hash.slice(1));
      if (!hash.startsWith("find=") || !d.note) return window.scrollTo(0, 0);
      const probes = hash.slice(5).split("|").filter(Boolean);
      const blocks = main.querySelectorAll("article.note :is(p, li, h1, h2, h3, h4, h5, h6, td, pre, blockquote)");
      for (const probe of probes) {
        const p = probe.toLowerCase();
        for (const el of blocks) {
          if (el.textContent.replace(/\s+/g, " ").toLowerCase().includes(p)) {
            el.classList.add("hit");
            el.scrollIntoView({ block: "center" });
            return;
          }
        }
      }
    },
  },

  history: {
    title: (r) => "History: " + r.path,
    async load(r) {
      return (await api("/mcp/notes/history?" + q({ path: r.path, limit: 30 }))).data;
    },
    draw(d, r) {
      const list = h("div", {});
      const add = (commits) => commits.forEach((c) => list.append(commitCard(c, r.path)));
      add(d.commits);
      let cursor = d.next_cursor;
      const more = h("button", { type: "button", hidden: !cursor, onclick: async () => {
        more.disabled = true;
        try {
          const next = (await api("/mcp/notes/history?" + q({ path: r.path, limit: 30, cursor }))).data;
          add(next.commits);
          cursor = next.next_cursor;
          more.hidden = !cursor;
        } catch (err) { say(err.message); }
        more.disabled = false;
      } }, "Older commits");
      return h("section", {}, h("h1", {}, "History of ", h("a", { href: noteHref(r.path) }, r.path)),
        d.commits.length ? null : h("p", { class: "muted" }, "No commits touch this note."),
        list, more);
    },
  },

  search: {
    title: (r) => "Search: " + r.q,
    async load(r) {
      if (!r.q) return null;
      return (await api("/mcp/index/query?" + q({ q: r.q, limit: PAGE, offset: r.offset || null }))).data;
    },
    draw(d, r) {
      if (!d) return h("section", {}, h("h1", {}, "Search"), h("p", { class: "muted" }, "Type words in the box above."));
      const page = (offset) => "/ui/search?" + q({ q: r.q, offset: offset || null });
      return h("section", {},
        h("h1", {}, "Search: ", r.q),
        h("p", { class: "meta" }, h("span", {}, "Mode: " + d.mode), d.degraded ? h("span", { class: "warn" }, d.degraded) : null,
          h("span", {}, "Results " + (r.offset + 1) + "–" + (r.offset + d.chunks.length))),
        d.chunks.length ? h("ol", { class: "plain results", start: r.offset + 1 }, d.chunks.map(hit)) :
          h("p", { class: "muted" }, r.offset ? "No more results." : "Nothing matches."),
        h("nav", { class: "pager", "aria-label": "Result pages" },
          r.offset > 0 ? h("a", { href: page(Math.max(0, r.offset - PAGE)) }, "← Previous") : null,
          d.chunks.length === PAGE ? h("a", { href: page(r.offset + PAGE), rel: "next" }, "Next →") : null));
    },
  },

  runs: {
    title: () => "Agent runs",
    async load() { return (await api("/agent/runs")).data; },
    draw(runs) {
      return h("section", {}, h("h1", {}, "Agent runs"),
        runs.length ? null : h("p", { class: "muted" }, "No agent runs yet."),
        runs.map((run) => h("div", { class: "card" },
          h("h3", {}, h("a", { href: "/ui/runs/" + encodeURIComponent(run.run_id) }, run.task || run.run_id)),
          h("div", { class: "meta" }, h("span", {}, when(run.started_at)),
            h("span", { class: run.stopped === "reply" ? "ok" : run.stopped ? "warn" : "" }, run.stopped ? "stopped: " + run.stopped : "running or cut off"),
            h("span", { class: "mono" }, run.run_id)))));
    },
  },

  run: {
    title: (r) => "Run " + r.id.slice(0, 13),
    async load(r) { return (await api("/agent/runs/" + encodeURIComponent(r.id))).data; },
    draw: runView,
  },

  proposals: {
    title: () => "Proposals",
    async load() {
      const [pending, applied, rejected] = await Promise.all(["pending", "applied", "rejected"].map(
        (status) => api("/mcp/proposals?" + q({ status, limit: status === "pending" ? 100 : 20 })).then((x) => x.data.proposals)));
      return { pending, decided: applied.concat(rejected).sort((a, b) => (b.decided_at || "").localeCompare(a.decided_at || "")) };
    },
    draw(d) {
      return h("section", {}, h("h1", {}, "Proposals"),
        h("h2", {}, "Waiting for you (" + d.pending.length + ")"),
        d.pending.length ? d.pending.map(proposalCard) : h("p", { class: "muted" }, "Nothing is waiting."),
        h("h2", {}, "Decided"),
        d.decided.length ? d.decided.map(proposalCard) : h("p", { class: "muted" }, "None yet."));
    },
  },

  proposal: {
    title: (r) => "Proposal " + r.id.slice(0, 13),
    async load(r) { return (await api("/mcp/proposals/get?" + q({ id: r.id }))).data; },
    draw: proposalView,
  },

  status: {
    title: () => "Status",
    async load() {
      const [index, repo, config] = await Promise.all([
        api("/mcp/index/status"), api("/mcp/repo/status"), api("/config")]);
      return { index: index.data, repo: repo.data, config: config.data };
    },
    draw: statusView,
  },

  missing: {
    title: () => "Not found",
    async load() { return null; },
    draw: () => h("section", {}, h("h1", {}, "Not found"), h("p", {}, "No view at this address. ", h("a", { href: "/ui/notes/" }, "Go to the notes."))),
  },
};

// ---------- pieces of views ----------

function commitCard(c, path) {
  const diffBox = h("div", {});
  const result = notice("commit:" + c.commit + ":" + path);
  const showDiff = h("button", { type: "button", "aria-expanded": "false", onclick: async () => {
    if (showDiff.getAttribute("aria-expanded") === "true") {
      diffBox.replaceChildren(); showDiff.setAttribute("aria-expanded", "false"); showDiff.textContent = "Show diff"; return;
    }
    try {
      const d = (await api("/mcp/notes/diff?" + q({ commit: c.commit, path }))).data;
      diffBox.replaceChildren(...d.files.map((f) => h("div", {}, h("div", { class: "meta" }, f.status + " " + f.path), diffView(f.diff))),
        d.truncated ? h("p", { class: "warn" }, "Diff cut short.") : "");
      showDiff.setAttribute("aria-expanded", "true"); showDiff.textContent = "Hide diff";
    } catch (err) { diffBox.replaceChildren(h("p", { class: "error" }, err.message)); }
  } }, "Show diff");
  const revert = h("button", { type: "button", class: "danger", onclick: async () => {
    if (!window.confirm("Revert commit " + short(c.commit) + " (" + c.subject + ") for " + path + "? This makes a new commit (or a proposal in review mode).")) return;
    revert.disabled = true;
    try {
      const { status, data } = await api("/mcp/notes/revert", { body: { commit: c.commit, path } });
      if (status === 202 || data.proposal) {
        const id = data.proposal.id || data.proposal;
        result.set(() => h("p", { class: "notice" }, "Filed as a proposal: ",
          h("a", { href: "/ui/proposals/" + encodeURIComponent(id) }, "review it")));
      } else {
        result.set(() => h("p", { class: "notice" }, "Reverted in commit " + short(data.commit) + "."));
      }
      say("Reverted " + short(c.commit));
    } catch (err) {
      result.set(() => h("p", { class: "error" }, err.message));
      revert.disabled = false;
    }
  } }, "Revert");
  return h("div", { class: "card commit", "data-commit": c.commit },
    h("h3", {}, c.subject),
    h("div", { class: "meta" }, h("span", {}, c.author), h("span", {}, when(c.time)), h("span", { class: "mono" }, short(c.commit)),
      c.run_id ? h("a", { href: "/ui/runs/" + encodeURIComponent(c.run_id) }, "run " + c.run_id.slice(0, 8)) : null),
    h("div", { class: "actions" }, showDiff, revert), result.box, diffBox);
}

function hit(chunk) {
  const m = chunk.metadata;
  const chars = Array.from(chunk.content);
  const off = m.snippet_offset;
  let snippet = off ? chars.slice(off.start, off.end).join("") : chars.slice(0, 240).join("");
  if (off && off.start > 0) snippet = "…" + snippet;
  if (off && off.end < chars.length) snippet += "…";
  const terms = chunk.explanation.matched_terms || [];
  const words = snippet.replace(/[*_`#>\[\]|]/g, " ").replace(/\s+/g, " ").replace(/^…/, "").trim().split(" ");
  const probes = [words.slice(0, 6).join(" "), ...terms].filter(Boolean).map((p) => p.slice(0, 60));
  const href = noteHref(m.path) + "#find=" + encodeURIComponent(probes.join("|"));
  return h("li", { class: "card hit-card" },
    h("h3", {}, h("a", { href }, m.title), " ", h("span", { class: "muted mono" }, m.path)),
    h("p", {}, highlight(snippet, terms)),
    h("div", { class: "meta" }, h("span", {}, "score " + chunk.score.toFixed(3)), terms.length ? h("span", {}, "matched: " + terms.join(", ")) : null));
}

/** `text` with each word that starts with a matched term in <mark>. */
function highlight(text, terms) {
  const clean = terms.filter((t) => t && t.length > 1).map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!clean.length) return text;
  const re = new RegExp("(?<![\\p{L}\\p{N}])(" + clean.join("|") + ")[\\p{L}\\p{N}]*", "giu");
  const out = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    out.push(text.slice(last, m.index), h("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function runView(d) {
  const byStep = new Map();
  let start = null, end = null;
  for (const e of d.events) {
    if (e.type === "run_start") start = e;
    else if (e.type === "run_end") end = e;
    else if (e.step) {
      if (!byStep.has(e.step)) byStep.set(e.step, []);
      byStep.get(e.step).push(e);
    }
  }
  const steps = [...byStep.entries()].map(([n, events]) => h("section", { class: "step", "aria-label": "Step " + n },
    h("h3", {}, "Step " + n),
    events.map(stepEvent)));
  const warnings = (end && end.warnings) || [];
  return h("section", { class: "run" },
    h("h1", {}, "Run: ", (start && start.task) || d.run_id),
    h("dl", { class: "kv" },
      h("dt", {}, "Run"), h("dd", { class: "mono" }, d.run_id),
      h("dt", {}, "Started"), h("dd", {}, when(start && start.at)),
      start && start.model ? [h("dt", {}, "Model"), h("dd", {}, start.model)] : null,
      h("dt", {}, "Stopped"), h("dd", { class: end && end.stopped === "reply" ? "ok" : "warn" },
        end ? end.stopped + (end.stop_detail ? ": " + end.stop_detail : "") : "still running, or cut off"),
      start && start.dry_run ? [h("dt", {}, "Dry run"), h("dd", {}, "yes: nothing was written")] : null),
    warnings.length ? h("div", { class: "error" }, h("strong", {}, "Warnings"), h("ul", {}, warnings.map((w) => h("li", {}, typeof w === "string" ? w : JSON.stringify(w))))) : null,
    steps,
    end && end.reply ? [h("h2", {}, "Reply"), h("pre", {}, end.reply)] : null,
    h("h2", {}, "What it changed"),
    d.commits && d.commits.length ? h("ul", {}, d.commits.map((c) => h("li", {},
      h("span", { class: "mono" }, short(c.commit)), " ", c.subject, " — ",
      (c.paths || []).map((p, i) => [i ? ", " : "", h("a", { href: "/ui/history/" + enc(p.path) }, p.path)]))))
      : end && end.proposal ? h("p", {}, "Filed proposal ", h("a", { href: "/ui/proposals/" + encodeURIComponent(end.proposal) }, end.proposal))
      : h("p", { class: "muted" }, "No commits."));
}

function stepEvent(e) {
  switch (e.type) {
    case "llm_response": {
      // Its thinking here; its code and reply are shown where they ran and at the end.
      const thought = /<think>([\s\S]*?)<\/think>/.exec(e.content || "");
      return [h("h4", {}, "The model's thinking (" + (e.ms || 0) + " ms)"),
        h("pre", { class: "model" }, thought ? thought[1].trim() : e.content),
        h("details", { class: "call whole" }, h("summary", {}, "Its whole answer"), h("div", {}, h("pre", {}, e.content)))];
    }
    case "code_start":
      return [h("h4", {}, "Its code"), h("pre", { class: "code" }, e.code)];
    case "host_call":
      return h("details", { class: "call host-call" },
        h("summary", {}, h("span", { class: e.ok ? "ok" : "bad" }, e.ok ? "✓ " : "✗ "), "mirai." + e.op + " (" + e.ms + " ms)"),
        h("div", {}, h("div", { class: "meta" }, "Request"), h("pre", {}, pretty(e.request)),
          h("div", { class: "meta" }, "Answer"), h("pre", {}, pretty(e.answer))));
    case "code_end":
      return [h("h4", {}, e.error ? "Result: failed" : "Result"),
        h("pre", { class: e.error ? "bad" : "" }, e.error ? (typeof e.error === "string" ? e.error : JSON.stringify(e.error, null, 1)) : JSON.stringify(e.result, null, 1)),
        e.console && e.console.length ? [h("div", { class: "meta" }, "Console"), h("pre", {}, Array.isArray(e.console) ? e.console.join("\n") : String(e.console))] : null];
    case "repeat":
      return h("p", { class: "warn" }, "Same code and outcome as before (" + e.times + " times).");
    case "reply_held":
      return [h("p", { class: "warn" }, "A reply right after a failed step was held back:"), h("pre", {}, e.reply)];
    default:
      return null;
  }
}

function who(p) {
  const r = p.requested_by || {};
  return [r.adapter || "?", r.run_id ? [" ", h("a", { href: "/ui/runs/" + encodeURIComponent(r.run_id) }, "run " + r.run_id.slice(0, 8))] : null,
    r.message ? " — " + r.message : null];
}

function proposalCard(p) {
  return h("div", { class: "card proposal-card", "data-id": p.id },
    h("h3", {}, h("a", { href: "/ui/proposals/" + encodeURIComponent(p.id) }, p.subject)),
    h("div", { class: "meta" }, h("span", { class: "status-" + p.status }, p.status), h("span", {}, when(p.created_at)),
      h("span", {}, "asked by ", who(p)), h("span", {}, p.paths.join(", "))));
}

function proposalView(d) {
  const p = d; // proposals.get answers the proposal flattened, with applies and conflicts
  const result = notice("proposal:" + p.id);
  const reason = h("input", { type: "text", id: "reject-reason", placeholder: "Why (optional)", "aria-label": "Reason for rejecting" });
  const decide = (action) => async () => {
    for (const b of buttons) b.disabled = true;
    try {
      const body = action === "approve" ? { id: p.id } : { id: p.id, reason: reason.value.trim() || undefined };
      const { data } = await api("/mcp/proposals/" + action, { body, reviewer: true });
      result.set(() => h("p", { class: "notice" }, action === "approve"
        ? "Approved: committed as " + short(data.commit) + "." : "Rejected."));
      say("Proposal " + (action === "approve" ? "approved" : "rejected"));
      folderCache.clear();
      refreshPending();
      show(true);
    } catch (err) {
      result.set(() => h("p", { class: "error" }, err.message));
      for (const b of buttons) b.disabled = false;
    }
  };
  const buttons = p.status === "pending" ? [
    h("button", { type: "button", class: "primary", id: "approve", disabled: !d.applies, onclick: decide("approve") }, "Approve"),
    h("button", { type: "button", class: "danger", id: "reject", onclick: decide("reject") }, "Reject"),
  ] : [];
  return h("section", { class: "proposal" },
    h("h1", {}, "Proposal: ", p.operation.subject),
    h("dl", { class: "kv" },
      h("dt", {}, "Status"), h("dd", { class: "status-" + p.status, id: "proposal-status" }, p.status),
      h("dt", {}, "Asked by"), h("dd", {}, who(p)),
      h("dt", {}, "Made"), h("dd", {}, when(p.created_at)),
      h("dt", {}, "Operation"), h("dd", { class: "mono" }, p.operation.name),
      p.status === "pending" ? [h("dt", {}, "Applies now"), h("dd", { class: d.applies ? "ok" : "bad" }, d.applies ? "yes" : "no: the notes changed since")] : null,
      p.commit ? [h("dt", {}, "Commit"), h("dd", { class: "mono" }, short(p.commit))] : null,
      p.reason ? [h("dt", {}, "Reason"), h("dd", {}, p.reason)] : null,
      p.decided_at ? [h("dt", {}, "Decided"), h("dd", {}, when(p.decided_at))] : null),
    (d.conflicts || []).map((c) => h("p", { class: "error" }, c.path + ": " + c.message)),
    buttons.length ? h("div", { class: "actions" }, buttons, reason) : null,
    result.box,
    p.changes.map((c) => h("div", {}, h("h2", {}, h("a", { href: noteHref(c.path) }, c.path)), diffView(c.diff, true))));
}

function statusView(d) {
  const i = d.index, r = d.repo, c = d.config;
  const row = (k, v, cls) => [h("dt", {}, k), h("dd", { class: cls || "" }, v === null || v === undefined ? "—" : String(v))];
  return h("section", {}, h("h1", {}, "Status"),
    h("h2", {}, "Policy"),
    h("dl", { class: "kv" }, row("Mode", c.policy_mode), row("Token required", c.auth_required ? "yes" : "no"), row("Version", c.version)),
    h("h2", {}, "Index"),
    h("dl", { class: "kv" },
      row("State", !i.present ? "no artifact yet" : i.stale ? "stale" : "fresh", i.stale ? "warn" : "ok"),
      i.stale_reason ? row("Why", i.stale_reason) : null,
      row("Notes", i.notes_present), row("Notes indexed", i.notes_indexed), row("Chunks", i.chunks_indexed),
      row("Too large to index", i.notes_too_large), row("Built", when(i.generated_at)),
      i.embeddings ? row("Embeddings", i.embeddings.chunks_embedded + " embedded, " + i.embeddings.chunks_pending + " pending") : null),
    h("h2", {}, "Repository and sync"),
    h("dl", { class: "kv" },
      row("Branch", r.branch), row("HEAD", short(r.head)), row("Remote", r.remote || "none (sync off)"),
      r.remote ? [row("Ahead", r.ahead), row("Behind", r.behind), row("Last push", when(r.last_push)), row("Last pull", when(r.last_pull))] : null,
      r.last_error ? row("Last error", r.last_error, "bad") : null,
      row("Unmerged branches", r.unmerged.length ? r.unmerged.map((u) => u.branch).join(", ") : "none", r.unmerged.length ? "warn" : "")));
}

// ---------- live updates ----------

let liveStarted = false;
let refreshTimer = null;

/** Something changed (`why`; null: maybe, while live updates were starting): redraw what differs. */
function changed(why) {
  folderCache.clear();
  if (why) say("Updated: " + why);
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => { show(true); refreshPending(); }, 150);
}

async function refreshPending() {
  try {
    const { data } = await api("/mcp/proposals?" + q({ status: "pending", limit: 100 }));
    const badge = document.getElementById("pending");
    const n = data.proposals.length;
    badge.hidden = n === 0;
    badge.textContent = n >= 100 ? "100+" : String(n);
    badge.setAttribute("aria-label", n + " pending");
  } catch (_) { /* the badge is a nicety */ }
}

function startLive() {
  if (liveStarted) return;
  liveStarted = true;
  refreshPending();
  stream(null);
}

/** The change stream (GET /events), read with fetch so the token travels in a header. */
async function stream(lastId) {
  let res;
  try {
    res = await fetch("/events", { headers: authHeaders(TOKEN, Object.assign({ Accept: "text/event-stream" },
      lastId ? { "Last-Event-ID": lastId } : {})), credentials: "omit", cache: "no-store" });
  } catch (_) {
    return setTimeout(() => stream(lastId), POLL_MS);
  }
  if (res.status !== 200 || !res.body) return poll();
  changed(null);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        let type = "message", id = null;
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
        }
        if (id) lastId = id;
        if (block.split(/\r?\n/).every((l) => l.startsWith(":"))) continue;
        changed(type);
      }
    }
  } catch (_) { /* reconnect below */ }
  setTimeout(() => stream(lastId), POLL_MS);
}

/** Before the change stream exists: index.status and repo.status every 1.5 s. */
function poll() {
  let last = null;
  const tick = async () => {
    if (!document.hidden) {
      try {
        const [i, r, p] = await Promise.all([api("/mcp/index/status"), api("/mcp/repo/status"),
          api("/mcp/proposals?" + q({ status: "pending", limit: 100 }))]);
        const now = JSON.stringify([r.data.head, i.data.notes_present, i.data.notes_changed_since,
          i.data.notes_indexed, p.data.proposals.map((x) => x.id)]);
        // The first look catches what changed between the view's load and now.
        if (last === null) changed(null);
        else if (now !== last) changed("notes changed");
        last = now;
      } catch (_) { /* try again next tick */ }
    }
    setTimeout(tick, POLL_MS);
  };
  tick();
}

show(false);
