// mirai's page: plain JavaScript, no framework, no build step.
// Every note, run and proposal comes from the HTTP API with the token kept in
// this tab's sessionStorage (and shared with the browser's other mirai tabs
// through worker.js, in memory), sent in the Authorization header (never a
// cookie). The token is typed, or, where mirai offers it, an access token
// from signing in through the identity provider (signin.js). Text from the API is put into the page as text; the one HTML it
// inserts is a note rendered and sanitized by the server (notes.render).
"use strict";

const TOKEN = "mirai.token";
const REVIEWER = "mirai.reviewer";
const SIGNED_IN = "mirai.signedin"; // "1" while this tab's token came from signing in
const PAGE = 10; // search results per page
const POLL_MS = 1500;
const STREAM_WAIT_MS = 2000; // a tab whose stream is not open by then polls

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

/**
 * Asks for a token (kind TOKEN or REVIEWER); resolves once one is typed,
 * rejects on cancel. Where mirai offers sign-in, the dialog offers it first
 * (`expired`: the access token from the last sign-in was refused).
 */
function askToken(kind, why, expired) {
  if (asking) return asking;
  asking = new Promise((resolve, reject) => {
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    const title = document.getElementById("token-title");
    const reason = document.getElementById("token-why");
    const offer = document.getElementById("signin-offer");
    title.textContent = kind === REVIEWER ? "Reviewer token needed" : "Token needed";
    reason.textContent = why ||
      (kind === REVIEWER ? "Approving and rejecting proposals needs MIRAI_REVIEWER_TOKEN."
                         : "This mirai needs its MIRAI_API_TOKEN.");
    offer.hidden = true;
    if (kind === TOKEN) {
      signIn.config().then((c) => {
        if (!c || !dialog.open) return;
        offer.hidden = false;
        title.textContent = expired ? "Sign-in expired — sign in again" : "Sign in";
        let provider = c.issuer;
        try { provider = new URL(c.issuer).host; } catch (_) { /* the issuer as it is */ }
        reason.textContent = (expired ? "Your sign-in is no longer accepted. " : "") +
          "Sign in through " + provider + ".";
        document.getElementById("signin-button").focus();
      });
    }
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
      if (kind === TOKEN) { sessionStorage.removeItem(SIGNED_IN); share(SIGNED_IN, null); }
      share(kind, input.value.trim());
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

document.getElementById("signin-button").addEventListener("click", async (event) => {
  event.currentTarget.disabled = true;
  if (!(await signIn.start())) {
    event.currentTarget.disabled = false;
    document.getElementById("token-why").textContent = "Sign-in is not available now: paste a token.";
  }
});

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
      // An access token from signing in that the server now refuses (expired, revoked keys).
      const expired = res.status === 401 && sessionStorage.getItem(SIGNED_IN) === "1" &&
        /invalid_token/.test(res.headers.get("WWW-Authenticate") || "");
      sessionStorage.removeItem(kind);
      if (kind === TOKEN) { sessionStorage.removeItem(SIGNED_IN); share(SIGNED_IN, null); }
      share(kind, null);
      await askToken(kind, error.message, expired);
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

/**
 * A unified diff with each line's old and new numbers and its +/- marker
 * (never colour alone); side by side too where the view offers it.
 */
function diffView(text, sideBySide) {
  const lines = (text || "").replace(/\n$/, "").split("\n");
  let oldNo = 0, newNo = 0;
  const numbered = lines.map((line) => {
    const kind = diffClass(line);
    const at = kind === "hunk" && /^@@ -(\d+)(?:,\d+)? \+(\d+)/.exec(line);
    if (at) { oldNo = Number(at[1]); newNo = Number(at[2]); }
    const row = { kind, line, old: "", new: "" };
    if (kind === "del") row.old = oldNo++;
    else if (kind === "add") row.new = newNo++;
    else if (kind === "ctx") { row.old = oldNo++; row.new = newNo++; }
    return row;
  });
  const marker = { add: "+", del: "−", ctx: " " };
  const unified = h("div", { class: "diff unified", role: "group", "aria-label": "Unified diff" },
    numbered.map((r) => r.kind === "head" || r.kind === "hunk"
      ? h("span", { class: "l " + r.kind }, r.line)
      : h("span", { class: "l " + r.kind },
        h("span", { class: "n", "aria-hidden": "true" }, String(r.old)),
        h("span", { class: "n", "aria-hidden": "true" }, String(r.new)),
        h("span", { class: "m" }, marker[r.kind]),
        h("span", { class: "t" }, r.line.slice(1)))));
  if (!sideBySide) return unified;
  const rows = [];
  let dels = [], adds = [];
  const side = (r, kind) => r === undefined
    ? [h("td", { class: "n" }), h("td", {}, "\u00a0")]
    : [h("td", { class: "n" }, String(kind === "del" ? r.old : r.new)),
      h("td", { class: kind }, h("span", { class: "m" }, marker[kind]), cell(r.line.slice(1)))];
  const flush = () => {
    const n = Math.max(dels.length, adds.length);
    for (let i = 0; i < n; i++) rows.push(h("tr", {}, side(dels[i], "del"), side(adds[i], "add")));
    dels = []; adds = [];
  };
  // The diff's own file headers, each side under its own: what is applied is what is shown.
  const heads = numbered.filter((r) => r.kind === "head");
  const from = heads.find((r) => r.line.startsWith("--- "));
  const to = heads.find((r) => r.line.startsWith("+++ "));
  for (const r of heads) {
    if (r !== from && r !== to) rows.push(h("tr", { class: "head" }, h("td", { colspan: 4 }, r.line)));
  }
  if (from || to) {
    rows.push(h("tr", { class: "head" },
      h("td", { colspan: 2 }, from ? from.line : ""), h("td", { colspan: 2 }, to ? to.line : "")));
  }
  for (const r of numbered) {
    if (r.kind === "head") continue;
    if (r.kind === "hunk") { flush(); rows.push(h("tr", { class: "hunk" }, h("td", { colspan: 4 }, r.line))); }
    else if (r.kind === "del") dels.push(r);
    else if (r.kind === "add") adds.push(r);
    else {
      flush();
      const t = cell(r.line.slice(1));
      rows.push(h("tr", {}, h("td", { class: "n" }, String(r.old)), h("td", {}, t), h("td", { class: "n" }, String(r.new)), h("td", {}, t)));
    }
  }
  flush();
  return h("div", {}, unified,
    h("div", { class: "diff" }, h("table", { class: "split", "aria-label": "Side-by-side diff" },
      h("colgroup", {}, h("col", { class: "nc" }), h("col", {}), h("col", { class: "nc" }), h("col", {})),
      h("tbody", {}, rows))));
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
/** The box each notice shows in now: a redraw while the action ran made a new one. */
const noticeBoxes = new Map();

function notice(key, make) {
  const box = h("div", { role: "status", class: "result" });
  noticeBoxes.set(key, box);
  const fill = (into) => { const made = notices.get(key); into.replaceChildren(...(made ? [made()] : [])); };
  fill(box);
  return { box, set(made) {
    notices.set(key, made);
    fill(box);
    const shown = noticeBoxes.get(key);
    if (shown && shown !== box) fill(shown);
  } };
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
  if (path === "/ui/tags" || path === "/ui/tags/") return { name: "tags" };
  if (path.startsWith("/ui/tags/")) return { name: "tag", tag: rest("/ui/tags/") };
  if (path === "/ui/links") return { name: "links" };
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
  // A place in the view shown (a footnote, the outline): go there, no reload.
  if (url.pathname === location.pathname && url.search === location.search && url.hash) {
    history.pushState(null, "", url.hash);
    jumpTo(decodeURIComponent(url.hash.slice(1)));
    return;
  }
  go(url.pathname + url.search + url.hash);
});

// "/" puts the cursor in the search box, unless one is typing already.
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const t = event.target;
  if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
  event.preventDefault();
  const input = document.getElementById("search-input");
  input.focus();
  input.select();
});

/** A heading's id: its words, lowercased, joined by dashes. */
function slug(text) {
  return "h-" + String(text).toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
    .replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-+|-+$/g, "");
}

/** Scrolls to a place in the note: an id (a footnote), a heading's text, or a block's ^id. */
function jumpTo(place) {
  if (!place) return false;
  let el = document.getElementById(place) || document.getElementById(slug(place));
  if (!el && place.startsWith("^")) {
    el = [...main.querySelectorAll("article.note :is(p, li, td, blockquote)")].find((b) => b.textContent.includes(place));
  }
  if (!el) return false;
  for (const old of main.querySelectorAll(".target")) old.classList.remove("target");
  el.classList.add("target");
  if (!el.hasAttribute("tabindex")) el.setAttribute("tabindex", "-1");
  el.focus({ preventScroll: true });
  el.scrollIntoView({ block: "start" });
  return true;
}

window.addEventListener("popstate", () => show(false));

document.getElementById("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const words = document.getElementById("search-input").value.trim();
  if (words) go("/ui/search?" + q({ q: words }));
});

function markNav(name) {
  const section = { notes: "notes", history: "notes", runs: "runs", run: "runs", proposals: "proposals", proposal: "proposals",
    status: "status", tags: "tags", tag: "tags", links: "tags" }[name];
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
  // A redraw never touches what a person is typing in the search box.
  if (route.name === "search" && !refresh) document.getElementById("search-input").value = route.q;
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
  const typed = typing();
  main.replaceChildren(view.draw(data, route));
  retype(typed);
  if (view.title.length && data) document.title = view.title(route, data) + " · mirai";
  if (refresh) window.scrollTo(0, y);
  else {
    main.focus({ preventScroll: true });
    if (view.after) view.after(data, route); else window.scrollTo(0, 0);
  }
  startLive();
}

/** What a person has typed into the view's fields (by id), and where the cursor is. */
function typing() {
  return [...main.querySelectorAll("input[id], textarea[id]")]
    .filter((el) => el.type !== "checkbox" && el.value)
    .map((el) => ({ id: el.id, value: el.value, focused: document.activeElement === el,
      from: el.selectionStart, to: el.selectionEnd }));
}

/** Puts typed text back into the redrawn view's fields of the same id. */
function retype(typed) {
  for (const t of typed) {
    const el = document.getElementById(t.id);
    if (!el || el.disabled) continue;
    el.value = t.value;
    if (t.focused) {
      el.focus({ preventScroll: true });
      try { el.setSelectionRange(t.from, t.to); } catch (_) { /* not a text field */ }
    }
  }
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

/** The front matter as a table; a `[[wikilink]]` in it links where notes.links resolves it. */
function frontMatter(fm, resolved) {
  if (!fm || !Object.keys(fm).length) return null;
  const text = (v) => typeof v === "string" ? v
    : Array.isArray(v) && v.every((x) => typeof x !== "object") ? v.join(", ") : JSON.stringify(v);
  const linked = (value) => {
    const out = [];
    let last = 0;
    for (const m of value.matchAll(/\[\[([^\[\]|#]+)(#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]/g)) {
      const target = resolved.get(m[1].trim()) || resolved.get(m[1].trim() + (m[2] || ""));
      out.push(value.slice(last, m.index));
      out.push(target ? h("a", { href: noteHref(target) + (m[2] ? "#" + encodeURIComponent(m[2].slice(1)) : "") }, m[3] || m[1])
        : h("span", { class: "unresolved" }, m[3] || m[1]));
      last = m.index + m[0].length;
    }
    out.push(value.slice(last));
    return out;
  };
  return h("table", { class: "fm", "aria-label": "Front matter" }, h("tbody", {},
    Object.entries(fm).map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, linked(text(v)))))));
}

function tagLink(tag) {
  return h("a", { class: "tag", href: "/ui/tags/" + encodeURIComponent(tag) }, "#" + tag);
}

const CALLOUTS = { note: "Note", info: "Info", tip: "Tip", hint: "Tip", important: "Important", success: "Success",
  check: "Success", done: "Success", question: "Question", help: "Question", faq: "Question", warning: "Warning",
  caution: "Warning", attention: "Warning", failure: "Failure", fail: "Failure", missing: "Failure", danger: "Danger",
  error: "Danger", bug: "Bug", example: "Example", quote: "Quote", cite: "Quote", abstract: "Summary", summary: "Summary",
  tldr: "Summary", todo: "Todo" };

/**
 * The server's sanitized HTML, made ready to read: headings get ids (their
 * words), Obsidian callouts (`> [!warning] Title`) become titled boxes, and
 * an opening h1 that repeats the note's title is not shown twice.
 */
function noteArticle(html, title) {
  const article = h("article", { class: "note" });
  article.innerHTML = html; // sanitized by the server (notes.render)
  const first = article.firstElementChild;
  if (first && first.tagName === "H1" && first.textContent.trim().toLowerCase() === String(title).trim().toLowerCase()) first.remove();
  const seen = new Map();
  for (const el of article.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    if (el.id) continue;
    const base = slug(el.textContent);
    const n = seen.get(base) || 0;
    seen.set(base, n + 1);
    el.id = n ? base + "-" + n : base;
  }
  for (const quote of article.querySelectorAll("blockquote")) {
    const p = quote.firstElementChild;
    const node = p && p.tagName === "P" ? p.firstChild : null;
    const m = node && node.nodeType === Node.TEXT_NODE && /^\s*\[!([A-Za-z-]+)\]([+-]?)[ \t]*([^\n]*)\n?/.exec(node.data);
    if (!m) continue;
    const kind = m[1].toLowerCase();
    const label = CALLOUTS[kind] || (kind.charAt(0).toUpperCase() + kind.slice(1));
    node.data = node.data.slice(m[0].length);
    // The rest of the title line, up to the paragraph's first line break.
    const titleParts = [];
    let next = node.nextSibling;
    if (m[3] === "" && !node.data) {
      while (next && next.nodeName !== "BR" && !(next.nodeType === Node.TEXT_NODE && next.data.includes("\n"))) {
        const after = next.nextSibling; titleParts.push(next); next = after;
      }
    }
    if (!p.textContent.trim() && !p.querySelector("a, img, code")) p.remove();
    const head = h("div", { class: "callout-title" }, h("strong", {}, m[3] ? m[3] : titleParts.length ? titleParts : label));
    quote.classList.add("callout", "callout-" + (CALLOUTS[kind] || "Note").toLowerCase());
    quote.setAttribute("data-callout", kind);
    quote.prepend(head);
  }
  return article;
}

/**
 * A file of the vault (files.read), fetched with the token: its bytes as a Blob.
 * A 401 asks for the token and tries again, as api() does.
 */
async function fileBlob(path) {
  for (;;) {
    const res = await fetch("/mcp/files/read?" + q({ path }), {
      headers: authHeaders(TOKEN, { Accept: "*/*" }), credentials: "omit", cache: "no-store",
    });
    if (res.status === 401) {
      sessionStorage.removeItem(TOKEN);
      share(TOKEN, null);
      await askToken(TOKEN, "the token is needed to read " + path);
      continue;
    }
    if (!res.ok) {
      let error = {};
      try { error = (await res.json()).error || {}; } catch (_) { error = {}; }
      throw new ApiError(res.status, error.code, error.message || res.statusText);
    }
    return res.blob();
  }
}

/**
 * Files of the vault a note embeds or links (notes.render marks them): an
 * image (`span.file-embed`, a raster type) is fetched with the token and shown
 * from a blob: URL, fifty at most; any other file (SVG and PDF included)
 * becomes a link that downloads it, as an opaque octet stream, never opened.
 * Remote images are never loaded: they stay the server's plain spans.
 */
async function fillFiles(article) {
  const images = [...article.querySelectorAll("span.file-embed")].slice(0, 50);
  await Promise.all(images.map(async (span) => {
    const path = span.getAttribute("data-file");
    try {
      const blob = await fileBlob(path);
      const img = h("img", { class: "vault-image", alt: span.textContent || path, title: path });
      img.src = URL.createObjectURL(blob);
      span.replaceWith(img);
    } catch (err) {
      span.title = err.message;
    }
  }));
  for (const span of article.querySelectorAll("span.file-link")) {
    const path = span.getAttribute("data-file");
    const a = h("a", { href: "#", class: "file-download", title: "Download " + path }, span.textContent || path);
    a.addEventListener("click", async (event) => {
      event.preventDefault();
      try {
        const bytes = new Blob([await fileBlob(path)], { type: "application/octet-stream" });
        const url = URL.createObjectURL(bytes);
        const save = h("a", { href: url, download: path.split("/").pop() });
        document.body.append(save);
        save.click();
        save.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (err) {
        a.title = err.message;
      }
    });
    span.replaceWith(a);
  }
}

/**
 * Sends `file` as the raw body of files.write to `path` (create_only: a file
 * already there is the server's 409 conflict), with the token; `progress`
 * gets the fraction sent. XMLHttpRequest, for its upload progress. A 401
 * asks for the token and tries again, as api() does.
 */
async function uploadFile(path, file, progress) {
  for (;;) {
    const answer = await new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", "/mcp/files/write?" + q({ path, create_only: "true" }));
      const headers = authHeaders(TOKEN, { "Content-Type": "application/octet-stream" });
      for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
      xhr.upload.onprogress = (e) => { if (e.lengthComputable) progress(e.loaded / e.total); };
      xhr.onload = () => {
        let data = null;
        try { data = JSON.parse(xhr.responseText); } catch (_) { data = null; }
        resolve({ status: xhr.status, data });
      };
      xhr.onerror = () => reject(new ApiError(0, "network", "the upload did not reach mirai (the connection failed)"));
      xhr.send(file);
    });
    const error = answer.data && answer.data.error ? answer.data.error : {};
    if (answer.status === 401) {
      sessionStorage.removeItem(TOKEN);
      share(TOKEN, null);
      await askToken(TOKEN, error.message);
      continue;
    }
    if (answer.status < 200 || answer.status >= 300) throw new ApiError(answer.status, error.code, error.message);
    return answer;
  }
}

/** A free-looking name after a clash: `plot.png` -> `plot-2.png`, `plot-2.png` -> `plot-3.png`. */
function nextName(name) {
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  const m = /^(.*)-(\d+)$/.exec(stem);
  return m ? m[1] + "-" + (Number(m[2]) + 1) + ext : stem + "-2" + ext;
}

/**
 * The "Attach file" control of a note's view: a labelled file input and the
 * name the file gets in the note's folder (editable); Upload sends it as the
 * raw body (never replacing a file: a clash shows the server's conflict and
 * offers the next free-looking name); once it is in, the page offers to add
 * `![[name]]` at the end of the note (notes.append), and writes nothing
 * unless that is confirmed.
 */
function attachControl(notePath) {
  const folder = notePath.includes("/") ? notePath.slice(0, notePath.lastIndexOf("/") + 1) : "";
  const input = h("input", { type: "file", id: "attach-file", "aria-describedby": "attach-help" });
  const name = h("input", { type: "text", id: "attach-name", spellcheck: "false", autocomplete: "off" });
  const bar = h("progress", { max: "1", value: "0", hidden: true, "aria-label": "Upload progress" });
  const status = h("div", { class: "attach-status", "aria-live": "polite" });
  const upload = h("button", { type: "button", id: "attach-upload", disabled: true }, "Upload");
  input.addEventListener("change", () => {
    const file = input.files && input.files[0];
    name.value = file ? file.name : "";
    upload.disabled = !file;
    status.replaceChildren();
  });
  // `proposal`: the id review mode answered (202) instead of writing.
  const offer = (path, embedName, proposal) => {
    const embed = "![[" + embedName + "]]";
    const done = proposal
      ? ["Proposed ", h("span", { class: "mono" }, path), " (a reviewer decides: ", h("a", { href: "/ui/proposals/" + enc(proposal) }, "the proposal"), ")"]
      : ["Uploaded ", h("span", { class: "mono" }, path)];
    const insert = h("button", { type: "button", id: "attach-insert" }, "Insert embed");
    const skip = h("button", { type: "button", id: "attach-skip" }, "Not now");
    insert.addEventListener("click", async () => {
      insert.disabled = skip.disabled = true;
      try {
        // A blank line first: the embed is a paragraph of its own, not the end of the last one.
        const { status: code } = await api("/mcp/notes/append", { body: { path: notePath, text: "\n" + embed } });
        say((code === 202 ? "Proposed adding " : "Added ") + embed + " to " + notePath);
        show(false);
      } catch (err) {
        insert.disabled = skip.disabled = false;
        status.append(h("p", { class: "error", role: "alert" }, err.message));
      }
    });
    skip.addEventListener("click", () => status.replaceChildren(h("p", { class: "muted" }, done, "; the note is unchanged.")));
    status.replaceChildren(h("p", { class: "ok-line" }, done, ". Add ",
      h("code", {}, embed), " at the end of this note?"), h("div", { class: "actions" }, insert, skip));
    insert.focus();
  };
  upload.addEventListener("click", async () => {
    const file = input.files && input.files[0];
    const chosen = name.value.trim();
    if (!file || !chosen) return;
    if (chosen.includes("/")) {
      status.replaceChildren(h("p", { class: "error", role: "alert" }, "A name, not a path: the file goes beside the note, in " + (folder || "the top folder") + "."));
      return;
    }
    const path = folder + chosen;
    upload.disabled = true;
    bar.hidden = false;
    bar.value = 0;
    status.replaceChildren(h("p", { class: "muted" }, "Uploading " + path + "…"));
    try {
      const answer = await uploadFile(path, file, (part) => { bar.value = part; });
      bar.value = 1;
      offer(path, chosen, answer.status === 202 && answer.data ? answer.data.proposal : null);
    } catch (err) {
      const again = err.code === "conflict" ? nextName(chosen) : null;
      const use = again ? h("button", { type: "button", id: "attach-rename" }, "Use " + again) : null;
      if (use) use.addEventListener("click", () => { name.value = again; status.replaceChildren(); upload.focus(); });
      status.replaceChildren(h("p", { class: "error", role: "alert" }, err.message), use);
    } finally {
      upload.disabled = !(input.files && input.files[0]);
      bar.hidden = true;
    }
  });
  return h("section", { class: "attach", "aria-label": "Attach a file" },
    h("div", { class: "attach-row" },
      h("label", { for: "attach-file" }, "Attach file"), input,
      h("label", { for: "attach-name" }, "Name"), name, upload, bar),
    h("p", { id: "attach-help", class: "muted" }, "The file is added beside this note" + (folder ? ", in " + folder : "") +
      " (images, PDFs; never replacing a file). Nothing is added to the note unless you confirm."),
    status);
}

/** Embedded notes (`![[note]]`, `![[note#Heading]]`): shown inline, one level deep, ten at most. */
async function fillEmbeds(article) {
  const embeds = [...article.querySelectorAll("a.note-embed")].slice(0, 10);
  await Promise.all(embeds.map(async (a) => {
    const url = new URL(a.getAttribute("href"), location.origin);
    const path = url.pathname.slice(10).split("/").map(decodeURIComponent).join("/");
    const box = h("div", { class: "embedded", role: "group", "aria-label": "Embedded: " + path },
      h("div", { class: "embedded-title" }, h("a", { href: a.getAttribute("href") }, a.textContent || path)));
    try {
      const n = (await api("/mcp/notes/render?" + q({ path }))).data;
      const body = h("div", {});
      body.innerHTML = n.html; // sanitized by the server (notes.render)
      for (const inner of body.querySelectorAll("a.note-embed")) inner.classList.remove("note-embed");
      const heading = url.hash ? decodeURIComponent(url.hash.slice(1)) : "";
      if (heading) {
        const all = [...body.querySelectorAll("h1, h2, h3, h4, h5, h6")];
        const at = all.find((x) => slug(x.textContent) === slug(heading));
        if (at) {
          const level = Number(at.tagName[1]);
          const part = [at];
          for (let el = at.nextElementSibling; el && !(/^H[1-6]$/.test(el.tagName) && Number(el.tagName[1]) <= level); el = el.nextElementSibling) part.push(el);
          body.replaceChildren(...part);
        }
      }
      for (const x of body.querySelectorAll("[id]")) x.removeAttribute("id");
      box.append(body);
    } catch (err) {
      box.append(h("p", { class: "error" }, err.message));
    }
    const holder = a.parentElement && a.parentElement.tagName === "P" && a.parentElement.textContent.trim() === a.textContent.trim()
      ? a.parentElement : a;
    holder.replaceWith(box);
  }));
}

/** The outline of the note: a link to each heading. */
function outline(article) {
  const heads = [...article.querySelectorAll("h1, h2, h3, h4, h5, h6")];
  if (!heads.length) return null;
  const top = Math.min(...heads.map((x) => Number(x.tagName[1])));
  return h("nav", { class: "outline", "aria-label": "Outline" },
    // Open while it is short enough not to push the note below the fold.
    h("details", { open: heads.length <= (window.matchMedia("(min-width: 56rem)").matches ? 12 : 6) },
      h("summary", {}, "Outline"),
      h("ol", { class: "plain" }, heads.map((x) => h("li", { style: null, class: "lv" + (Number(x.tagName[1]) - top) },
        h("a", { href: "#" + x.id }, x.textContent))))));
}

/** Outgoing links (broken ones marked) and backlinks with the line that links. */
function linksOf(links) {
  if (!links) return null;
  const seen = new Set();
  const out = links.outgoing.filter((l) => !seen.has(l.target) && seen.add(l.target));
  const broken = out.filter((l) => !l.resolved).length;
  return h("div", { class: "vault-links" },
    h("section", { "aria-labelledby": "out-h" },
      h("h2", { id: "out-h" }, "Links from this note (" + out.length + (broken ? ", " + broken + " broken" : "") + ")"),
      out.length ? h("ul", { class: "links" }, out.map((l) => h("li", { class: l.resolved ? "" : "broken" },
        l.resolved && l.resolved.endsWith(".md")
          ? h("a", { href: noteHref(l.resolved) + (l.target.includes("#") ? "#" + encodeURIComponent(l.target.split("#")[1]) : "") }, l.text || l.target)
          : l.resolved ? h("span", {}, l.text || l.target, " ", h("span", { class: "muted" }, "(attachment)"))
          : [h("span", { class: "bad" }, "broken: "), h("span", { class: "mono" }, l.target)],
        " ", h("span", { class: "muted" }, "line " + l.line))))
        : h("p", { class: "muted" }, "None."),
      links.outgoing_omitted ? h("p", { class: "muted" }, links.outgoing_omitted + " more not listed.") : null),
    h("section", { "aria-labelledby": "back-h" },
      h("h2", { id: "back-h" }, "Backlinks (" + (links.backlinks.length + (links.backlinks_omitted || 0)) + ")"),
      links.backlinks.length ? h("ul", { class: "links" }, links.backlinks.map((b) => h("li", {},
        h("a", { href: noteHref(b.path) }, b.path), " ", h("span", { class: "muted" }, "line " + b.line),
        h("div", { class: "context" }, b.context))))
        : h("p", { class: "muted" }, "No note links here.")));
}

let showSource = false;

const VIEWS = {
  notes: {
    title: (r, d) => r.path ? "Note: " + ((d && d.note && d.note.title) || r.path) : "Notes",
    async load(r) {
      if (r.refreshTree) folderCache.clear();
      if (!r.path) {
        const [root, home] = await Promise.all([folder(""), homeData()]);
        return { root, home };
      }
      const [root, note, links] = await Promise.all([folder(""),
        api("/mcp/notes/render?" + q({ path: r.path })).then((x) => x.data),
        api("/mcp/notes/links?" + q({ path: r.path })).then((x) => x.data, () => null)]);
      const source = showSource ? (await api("/mcp/notes/read?" + q({ path: r.path }))).data.content : null;
      return { root, note, links, source };
    },
    draw(d, r) {
      const side = tree(d.root, r.path);
      if (!d.note) return h("div", { class: "notes" }, side, homeView(d.root, d.home));
      const n = d.note;
      const toggle = h("button", { type: "button", "aria-pressed": showSource ? "true" : "false",
        onclick: () => { showSource = !showSource; show(false); } }, showSource ? "Rendered" : "Source");
      const resolved = new Map((d.links ? d.links.outgoing : []).filter((l) => l.resolved).map((l) => [l.target, l.resolved]));
      let body, contents = null;
      if (showSource) body = h("pre", { class: "source", "aria-label": "Markdown source" }, d.source);
      else {
        body = noteArticle(n.html, n.title);
        contents = outline(body);
      }
      const view = h("div", { class: "notes" }, side, h("section", { class: "note-view" },
        h("div", { class: "note-head" }, h("div", {}, h("h1", {}, n.title), h("div", { class: "path" }, n.path),
          n.tags && n.tags.length ? h("div", { class: "tags", "aria-label": "Tags" }, n.tags.map(tagLink)) : null),
          h("div", { class: "actions" }, toggle, h("a", { class: "button", href: "/ui/history/" + enc(n.path) }, "History"))),
        n.front_matter_error ? h("p", { class: "error" }, "Front matter: " + n.front_matter_error) : null,
        frontMatter(n.front_matter, resolved),
        contents,
        body,
        h("p", { class: "muted" }, n.line_count + " lines, " + n.bytes + " bytes"),
        attachControl(n.path),
        linksOf(d.links)));
      view.ready = showSource ? Promise.resolve() : Promise.all([fillEmbeds(body), fillFiles(body)]);
      return view;
    },
    async after(d) {
      if (!d.note) return window.scrollTo(0, 0);
      const drawn = main.firstElementChild;
      if (drawn && drawn.ready) await drawn.ready;
      const hash = location.hash.slice(1);
      if (hash.startsWith("find=") || hash.startsWith("section=")) return findHit(new URLSearchParams(hash));
      if (!jumpTo(decodeURIComponent(hash))) window.scrollTo(0, 0);
    },
  },

  tags: {
    title: () => "Tags",
    async load() { return (await api("/mcp/notes/tags")).data; },
    draw(d) {
      return h("section", {}, h("h1", {}, "Tags"),
        h("p", { class: "meta" }, h("span", {}, d.tags.length + " tags"), h("a", { href: "/ui/links" }, "Broken links and orphans")),
        d.tags.length ? h("ul", { class: "tag-list plain" }, d.tags.map((t) => h("li", {},
          tagLink(t.tag), " ", h("span", { class: "count" }, String(t.count)))))
          : h("p", { class: "muted" }, "No note has a tag yet."));
    },
  },

  tag: {
    title: (r) => "Tag: #" + r.tag,
    async load(r) { return (await api("/mcp/notes?" + q({ tag: r.tag }))).data; },
    draw(d, r) {
      return h("section", {}, h("h1", {}, "Notes tagged #" + r.tag),
        h("p", { class: "meta" }, h("span", {}, d.notes.length + " notes"), h("a", { href: "/ui/tags" }, "All tags")),
        d.notes.length ? h("ul", { class: "note-list" }, d.notes.map((p) => h("li", {}, h("a", { href: noteHref(p) }, p))))
          : h("p", { class: "muted" }, "No note has this tag."));
    },
  },

  links: {
    title: () => "Broken links and orphans",
    async load() { return (await api("/mcp/notes/graph?" + q({ limit: 200 }))).data; },
    draw(d) {
      const broken = h("tbody", {});
      const orphans = h("ul", { class: "note-list" });
      const add = (page) => {
        for (const b of page.broken) broken.append(h("tr", {}, h("td", {}, h("a", { href: noteHref(b.path) }, b.path)),
          h("td", {}, String(b.line)), h("td", { class: "mono" }, b.target)));
        for (const o of page.orphans) orphans.append(h("li", {}, h("a", { href: noteHref(o) }, o)));
      };
      add(d);
      let cursor = d.next_cursor;
      const more = h("button", { type: "button", hidden: !cursor, onclick: async () => {
        more.disabled = true;
        try {
          const next = (await api("/mcp/notes/graph?" + q({ limit: 200, cursor }))).data;
          add(next);
          cursor = next.next_cursor;
          more.hidden = !cursor;
        } catch (err) { say(err.message); }
        more.disabled = false;
      } }, "More");
      return h("section", {}, h("h1", {}, "Broken links and orphans"),
        h("h2", {}, "Broken links"),
        h("div", { class: "scroll" }, h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "Note"), h("th", {}, "Line"), h("th", {}, "Link to"))), broken)),
        d.broken.length ? null : h("p", { class: "muted" }, "No broken links."),
        h("h2", {}, "Orphans"), h("p", { class: "muted" }, "Notes no other note links to and that link nowhere."),
        orphans, more);
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
      return (await api("/mcp/index/query?" + q({ q: r.q, limit: PAGE, offset: r.offset || null, group: "note" }))).data;
    },
    draw(d, r) {
      if (!d) return h("section", {}, h("h1", {}, "Search"), h("p", { class: "muted" }, "Type words in the box above."));
      const page = (offset) => "/ui/search?" + q({ q: r.q, offset: offset || null });
      return h("section", {},
        h("h1", {}, "Search: ", r.q),
        h("p", { class: "meta" }, h("span", {}, "Mode: " + d.mode), d.degraded ? h("span", { class: "warn" }, d.degraded) : null,
          h("span", {}, d.chunks.length ? "Notes " + (r.offset + 1) + "–" + (r.offset + d.chunks.length) : "No notes")),
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
          run.outcome ? h("p", {}, run.outcome) : null,
          h("div", { class: "meta" }, h("span", {}, when(run.started_at)), runEnding(run),
            run.caller ? h("span", { class: "who" }, "started by " + run.caller) : null,
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
      await loadRunTasks();
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
    async load(r) {
      const [p] = await Promise.all([api("/mcp/proposals/get?" + q({ id: r.id })), runTasks.size ? null : loadRunTasks()]);
      return p.data;
    },
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
    h("div", { class: "meta" }, writer(c), h("span", {}, when(c.time)), h("span", { class: "mono" }, short(c.commit)),
      c.run_id ? h("a", { href: "/ui/runs/" + encodeURIComponent(c.run_id) }, "run " + c.run_id.slice(0, 8)) : null),
    h("div", { class: "actions" }, showDiff, revert), result.box, diffBox);
}

/** One note of a search answer (group=note): its title, path, tags, and the passage with each term marked. */
function hit(chunk) {
  const m = chunk.metadata;
  const ctx = chunk.context || { text: chunk.content.slice(0, 200), start: 0, end: 0, terms: [], heading: null };
  const chars = Array.from(ctx.text);
  const parts = [];
  let last = 0;
  for (const t of ctx.terms) {
    if (t.start < last) continue;
    parts.push(chars.slice(last, t.start).join(""), h("mark", {}, chars.slice(t.start, t.end).join("")));
    last = t.end;
  }
  parts.push(chars.slice(last).join(""));
  const more = ctx.end < Array.from(chunk.content).length;
  // Where the note opens: the section of the hit, and a few words around its first term.
  const first = ctx.terms[0];
  const around = first ? chars.slice(0, first.start).join("").split(" ").slice(-3).join(" ") + chars.slice(first.start).join("").split(" ").slice(0, 4).join(" ") : "";
  const place = new URLSearchParams();
  if (ctx.heading) place.set("section", ctx.heading);
  if (around) place.set("find", around.trim());
  if (first) place.set("term", chars.slice(first.start, first.end).join(""));
  const href = noteHref(m.path) + (place.toString() ? "#" + place.toString() : "");
  const others = chunk.other_chunks || 0;
  return h("li", { class: "card hit-card" },
    h("h3", {}, h("a", { href }, m.title)),
    h("div", { class: "meta" }, h("span", { class: "mono" }, m.path), (m.tags || []).map(tagLink)),
    h("p", { class: "snippet" }, ctx.start > 0 ? "…" : "", parts, more ? "…" : ""),
    h("div", { class: "meta" }, ctx.heading ? h("span", {}, "in “" + ctx.heading + "”") : null,
      others ? h("span", {}, others + (others === 1 ? " other part" : " other parts") + " of this note match") : null));
}

/** Opens a note at a search hit: in its section, the block holding the words around the term. */
function findHit(params) {
  const norm = (t) => t.replace(/\s+/g, " ").trim().toLowerCase();
  const blocks = [...main.querySelectorAll("article.note :is(p, li, h1, h2, h3, h4, h5, h6, td, th, pre, blockquote)")];
  const section = params.get("section");
  let from = 0;
  if (section) {
    const at = blocks.findIndex((b) => /^H[1-6]$/.test(b.tagName) && slug(b.textContent) === slug(section));
    if (at >= 0) from = at;
  }
  const term = norm(params.get("term") || "");
  const probes = [params.get("find"), params.get("find") && params.get("find").split(" ").slice(1, -1).join(" "), term]
    .filter(Boolean).map(norm);
  let found = null;
  for (const probe of probes) {
    found = blocks.slice(from).find((b) => !b.querySelector("p, li") && norm(b.textContent).includes(probe));
    if (found) break;
  }
  found = found || (section && from > 0 ? blocks[from] : null);
  if (!found) return window.scrollTo(0, 0);
  found.classList.add("hit");
  found.scrollIntoView({ block: "center" });
}

/** How a run ended, in words: replied, failed (and why), or still going. */
function runEnding(run) {
  const contradicted = run.reply_contradicted;
  if (!run.stopped) return h("span", { class: "run-state" }, "⋯ running, or cut off");
  if (run.stopped === "reply" && contradicted) return h("span", { class: "run-state bad" }, "✗ replied, but the record contradicts the reply");
  if (run.stopped === "reply") return h("span", { class: "run-state" }, "✓ replied");
  return h("span", { class: "run-state bad" }, "✗ failed: " + run.stopped.replace(/_/g, " "));
}

/** mirai's own outcome of a run (issue 43), whatever shape it comes in; null when absent. */
function outcomeView(outcome) {
  if (outcome === undefined || outcome === null) return null;
  if (typeof outcome === "string") return h("p", {}, outcome);
  if (typeof outcome !== "object") return h("p", {}, String(outcome));
  const lead = outcome.summary || outcome.text || outcome.message || outcome.line;
  const rest = Object.entries(outcome).filter(([k, v]) => !["summary", "text", "message", "line", "contradicted"].includes(k) && v !== null && !(Array.isArray(v) && !v.length));
  return [lead ? h("p", {}, String(lead)) : null,
    rest.length ? h("dl", { class: "kv" }, rest.map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")),
      h("dd", {}, typeof v === "string" ? v : Array.isArray(v) && v.every((x) => typeof x !== "object") ? v.join(", ") : JSON.stringify(v))])) : null];
}

function runView(d) {
  const byStep = new Map();
  let start = null, end = null, lastAnswered = null;
  for (const e of d.events) {
    if (e.type === "run_start") start = e;
    else if (e.type === "run_end") end = e;
    else if (e.step !== undefined && e.step !== null) {
      // A held-back reply belongs to the step whose answer held it.
      const step = e.type === "reply_held" && lastAnswered ? lastAnswered : e.step;
      if (e.type === "llm_response") lastAnswered = e.step;
      if (!byStep.has(step)) byStep.set(step, []);
      byStep.get(step).push(e);
    }
  }
  // Step 0 is mirai's own look before the model's first answer (issue 43).
  const stepName = (n) => n === 0 ? "mirai's look" : "Step " + n;
  const steps = [...byStep.entries()].map(([n, events]) => h("section", { class: "step", "aria-label": stepName(n) },
    h("h3", {}, n === 0 ? "mirai's look, before the model's first answer" : "Step " + n),
    events.map(stepEvent)));
  const warnings = (end && end.warnings) || [];
  const outcome = d.outcome !== undefined ? d.outcome : end && end.outcome;
  const contradicted = Boolean(end && end.reply_contradicted);
  return h("section", { class: "run" },
    h("h1", {}, "Run: ", (start && start.task) || d.run_id),
    h("dl", { class: "kv" },
      h("dt", {}, "Run"), h("dd", { class: "mono" }, d.run_id),
      h("dt", {}, "Started"), h("dd", {}, when(start && start.at)),
      d.caller ? [h("dt", {}, "Started by"), h("dd", { class: "who" }, d.caller)] : null,
      start && start.model ? [h("dt", {}, "Model"), h("dd", {}, start.model)] : null,
      h("dt", {}, "Ended"), h("dd", {}, runEnding({ stopped: end && end.stopped, reply_contradicted: contradicted }),
        end && end.stop_detail ? " (" + end.stop_detail + ")" : ""),
      start && start.dry_run ? [h("dt", {}, "Dry run"), h("dd", {}, "yes: nothing was written")] : null),
    outcome !== undefined && outcome !== null ? h("section", { class: "outcome card", "aria-label": "What mirai recorded" },
      h("h2", {}, "What happened (mirai's record)"), outcomeView(outcome)) : null,
    end && end.reply ? [h("h2", {}, "The model's reply"),
      contradicted ? h("p", { class: "error contradicted" }, "✗ The record contradicts this reply: trust the outcome above.") : null,
      h("pre", { class: contradicted ? "contradicted" : "" }, end.reply)] : null,
    warnings.length ? h("div", { class: "error" }, h("strong", {}, "Warnings"), h("ul", {}, warnings.map((w) => h("li", {}, typeof w === "string" ? w : JSON.stringify(w))))) : null,
    h("h2", {}, "What it changed"),
    d.commits && d.commits.length ? h("ul", {}, d.commits.map((c) => h("li", {},
      h("span", { class: "mono" }, short(c.commit)), " ", c.subject, " — ",
      (c.paths || []).map((p, i) => [i ? ", " : "", h("a", { href: "/ui/history/" + enc(p.path) }, p.path)]))))
      : end && end.proposal ? h("p", {}, "Filed proposal ", h("a", { href: "/ui/proposals/" + encodeURIComponent(end.proposal) }, end.proposal))
      : h("p", { class: "muted" }, "No commits."),
    h("h2", {}, "Steps"),
    steps);
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
    case "first_look":
      return h("p", { class: "meta" }, "mirai ran this code itself, read-only, and showed the model what it answered.");
    case "reply_held":
      return [h("p", { class: "warn" }, "A reply was held back" + (e.why ? " (" + e.why.replace(/_/g, " ") + ")" : "") + ":"), h("pre", {}, e.reply)];
    default:
      return null;
  }
}

/** The tasks of recent runs by run id: what a run's proposal was for. */
const runTasks = new Map();
async function loadRunTasks() {
  try { for (const r of (await api("/agent/runs")).data) if (r.task) runTasks.set(r.run_id, r.task); } catch (_) { /* a nicety */ }
}

const ADAPTERS = { agent: "an agent run", sandbox: "a program (agent/eval)", mcp: "an MCP client", http: "an HTTP caller", cli: "the command line" };

/** Who asked for a proposal, in words, with its run. */
function who(p) {
  const r = p.requested_by || {};
  const through = ADAPTERS[r.adapter] || r.adapter || "someone";
  return [r.caller ? [h("strong", { class: "who", title: r.caller_email || "" }, r.caller), " through " + through] : through,
    r.run_id ? [" (", h("a", { href: "/ui/runs/" + encodeURIComponent(r.run_id) }, "run " + r.run_id.slice(0, 8)), ")"] : null];
}

/** Who decided a proposal: the deciding caller's name ("operator" on the command line), else "the reviewer". */
function decider(p) {
  return p.decided_by || "the reviewer";
}

/** Who wrote a commit: the caller it was made for (its Mirai-Caller trailer), else its author; the email on hover. */
function writer(c) {
  return h("span", { class: "who", title: c.email || "" }, "by " + (c.caller || c.author));
}

/** What a proposal is for: its run's task, else the request's message, else its commit subject. */
function what(p) {
  const r = p.requested_by || {};
  return (r.run_id && runTasks.get(r.run_id)) || r.message || p.subject || (p.operation && p.operation.subject);
}

function proposalCard(p) {
  return h("div", { class: "card proposal-card", "data-id": p.id },
    h("h3", {}, h("a", { href: "/ui/proposals/" + encodeURIComponent(p.id) }, what(p))),
    h("div", { class: "meta" }, h("span", { class: "status-" + p.status }, p.status), h("span", {}, when(p.created_at)),
      h("span", {}, "asked by ", who(p)), h("span", {}, p.paths.join(", ")),
      p.status === "applied" || p.status === "rejected" ? h("span", {}, (p.status === "applied" ? "approved by " : "rejected by ") + decider(p)) : null),
    what(p) !== p.subject ? h("div", { class: "meta mono" }, p.subject) : null);
}

/** What the first page shows: each part may fail alone. */
async function homeData() {
  const get = (path) => api(path).then((x) => x.data, () => null);
  const [commits, pending, runs, index, repo, graph] = await Promise.all([
    get("/mcp/notes/history?" + q({ limit: 8 })), get("/mcp/proposals?" + q({ status: "pending", limit: 100 })),
    get("/agent/runs"), get("/mcp/index/status"), get("/mcp/repo/status"), get("/mcp/notes/graph?" + q({ limit: 1000 }))]);
  for (const r of runs || []) if (r.task) runTasks.set(r.run_id, r.task);
  return { commits, pending, runs, index, repo, graph };
}

/** The first page: what happened lately, what waits, and the state of the index, sync and links. */
function homeView(root, d) {
  const total = (root.notes || []).length + (root.folders || []).reduce((n, f) => n + f.notes, 0);
  const card = (title, ...body) => h("section", { class: "card home-card", "aria-label": title }, h("h2", {}, title), body);
  const commits = d.commits ? d.commits.commits : [];
  const pending = d.pending ? d.pending.proposals : [];
  const runs = (d.runs || []).slice(0, 5);
  const i = d.index, r = d.repo, g = d.graph;
  const broken = g ? g.broken.length : null;
  return h("section", { class: "home" },
    h("h1", {}, "Notes"),
    h("p", { class: "muted" }, total + " notes. Choose one, or search above (press /)."),
    h("div", { class: "home-grid" },
      card("Latest changes",
        commits.length ? h("ul", { class: "plain changes" }, commits.map((c) => h("li", {},
          h("div", {}, h("strong", { class: "who", title: c.email || "" }, c.caller || c.author), " ", c.subject),
          h("div", { class: "meta" }, h("span", {}, when(c.time)),
            c.run_id ? h("a", { href: "/ui/runs/" + encodeURIComponent(c.run_id) }, "run: " + (runTasks.get(c.run_id) || c.run_id.slice(0, 8))) : null,
            (c.paths || []).slice(0, 3).map((p) => p.status === "D" ? h("span", { class: "mono" }, p.path + " (deleted)")
              : h("a", { href: noteHref(p.path) }, p.path)),
            (c.paths || []).length > 3 ? h("span", {}, "+" + (c.paths.length - 3) + " more") : null))))
          : h("p", { class: "muted" }, d.commits ? "No commits yet." : "History is not available.")),
      card("Waiting for review",
        h("p", {}, h("a", { href: "/ui/proposals" }, pending.length >= 100 ? "100+ proposals" : pending.length + (pending.length === 1 ? " proposal" : " proposals")),
          pending.length ? " pending." : " pending: nothing waits."),
        pending.length ? h("ul", {}, pending.slice(0, 5).map((p) => h("li", {}, h("a", { href: "/ui/proposals/" + encodeURIComponent(p.id) }, what(p))))) : null),
      card("Latest agent runs",
        runs.length ? h("ul", { class: "plain changes" }, runs.map((run) => h("li", {},
          h("a", { href: "/ui/runs/" + encodeURIComponent(run.run_id) }, run.task || run.run_id),
          h("div", { class: "meta" }, h("span", {}, when(run.started_at)), runEnding(run),
            run.caller ? h("span", { class: "who" }, "started by " + run.caller) : null,
            run.outcome ? h("span", {}, run.outcome) : null))))
          : h("p", { class: "muted" }, "No agent runs yet.")),
      card("Index and sync",
        h("dl", { class: "kv" },
          h("dt", {}, "Index"), i ? h("dd", { class: !i.present || i.stale ? "warn" : "ok" },
            !i.present ? "⚠ no artifact yet (search indexes on demand)" : (i.stale ? "⚠ stale, catching up" : "✓ fresh") + ", " + i.notes_indexed + " notes indexed")
            : h("dd", {}, "—"),
          h("dt", {}, "Sync"), r ? h("dd", { class: r.last_error ? "bad" : "" }, !r.remote ? "off (no remote)"
            : r.last_error ? "✗ " + r.last_error : "ahead " + r.ahead + ", behind " + r.behind + (r.last_pull ? ", pulled " + when(r.last_pull) : ""))
            : h("dd", {}, "—"),
          h("dt", {}, "Branch"), h("dd", { class: "mono" }, r ? (r.branch || "—") + " @ " + short(r.head) : "—")),
        h("p", {}, h("a", { href: "/ui/status" }, "Status in full"))),
      card("Links and tags",
        h("p", {}, broken === null ? "Links are not available."
          : [h("a", { href: "/ui/links" }, (g.next_cursor && !g.orphans.length ? broken + "+" : String(broken)) + (broken === 1 ? " broken link" : " broken links")),
            broken ? "" : " ✓", g.next_cursor ? "" : ", " + g.orphans.length + (g.orphans.length === 1 ? " orphan note." : " orphan notes.")]),
        h("p", {}, h("a", { href: "/ui/tags" }, "Every tag")))));
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
      h("dt", {}, "For"), h("dd", {}, what(p)),
      h("dt", {}, "Asked by"), h("dd", {}, who(p)),
      h("dt", {}, "Made"), h("dd", {}, when(p.created_at)),
      h("dt", {}, "Operation"), h("dd", { class: "mono" }, p.operation.name),
      p.status === "pending" ? [h("dt", {}, "Applies now"), h("dd", { class: d.applies ? "ok" : "bad" }, d.applies ? "yes" : "no: the notes changed since")] : null,
      p.commit ? [h("dt", {}, "Commit"), h("dd", { class: "mono" }, short(p.commit))] : null,
      p.reason ? [h("dt", {}, "Reason"), h("dd", {}, p.reason)] : null,
      p.decided_at ? [h("dt", {}, "Decided"), h("dd", {}, when(p.decided_at) + " by ", h("strong", { class: "who" }, decider(p)))] : null),
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
      row("State", !i.present ? "⚠ no artifact yet (search indexes on demand)" : i.stale ? "⚠ stale" : "✓ fresh", !i.present || i.stale ? "warn" : "ok"),
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

// ---------- live updates: one change stream per browser ----------

let liveStarted = false;
let refreshTimer = null;
let hub = null; // the port of worker.js, which every mirai tab of this browser shares
let streamOpen = false;
let polling = false;
let waitTimer = null;

/** Tells the other tabs a token typed (or dropped) here. */
function share(kind, value) {
  if (hub) hub.postMessage({ type: "token", kind, value });
}

/**
 * Joins the browser's shared worker: it hands over the tokens another tab was
 * given and relays the one change stream. Resolves once the tokens are known
 * (or at once where there is no SharedWorker: the tab then keeps a stream of its own).
 */
function joinHub() {
  return new Promise((resolve) => {
    if (typeof SharedWorker !== "function") return resolve(false);
    let worker;
    try { worker = new SharedWorker("/ui/assets/worker.js", { name: "mirai" }); } catch (_) { return resolve(false); }
    let settled = false;
    const settle = (ok) => { if (!settled) { settled = true; resolve(ok); } };
    hub = worker.port;
    hub.onmessage = (m) => {
      const msg = m.data || {};
      if (msg.type === "tokens") {
        for (const [kind, value] of Object.entries(msg.tokens || {})) if (value) sessionStorage.setItem(kind, value);
        settle(true);
      } else if (msg.type === "open") streamState(true);
      else if (msg.type === "closed") streamState(false);
      else if (msg.type === "event") changed(words(msg.event, msg.data));
    };
    worker.addEventListener("error", () => { hub = null; settle(false); });
    hub.start();
    const hello = () => hub && hub.postMessage({ type: "hello",
      tokens: { [TOKEN]: sessionStorage.getItem(TOKEN), [REVIEWER]: sessionStorage.getItem(REVIEWER),
        [SIGNED_IN]: sessionStorage.getItem(SIGNED_IN) } });
    hello();
    // A closed tab leaves at once; one restored from the back-forward cache comes back.
    window.addEventListener("pagehide", () => hub && hub.postMessage({ type: "bye" }));
    window.addEventListener("pageshow", (e) => { if (e.persisted) hello(); });
    setTimeout(() => settle(false), 1000);
  });
}

/** The stream opened (catch up, stop polling) or closed (poll unless it is back within 2 s). */
function streamState(open) {
  if (open) {
    clearTimeout(waitTimer);
    waitTimer = null;
    const was = streamOpen;
    streamOpen = true;
    if (!was) changed(null);
    return;
  }
  streamOpen = false;
  waitForStream();
}

function waitForStream() {
  if (waitTimer) return;
  waitTimer = setTimeout(() => { waitTimer = null; if (!streamOpen) poll(); }, STREAM_WAIT_MS);
}

/** What an event means, in words for the live region (null: nothing worth saying). */
function words(type, data) {
  const d = data || {};
  const paths = (list) => {
    const names = (list || []).map((p) => (typeof p === "string" ? p : p.path));
    return names.length > 2 ? names.slice(0, 2).join(", ") + " and " + (names.length - 2) + " more" : names.join(" and ");
  };
  switch (type) {
    case "commit":
      return (d.caller || d.author || "Someone") + " changed " + (paths(d.paths) || "the notes") + (d.subject ? ": " + d.subject : "");
    case "notes_changed": return "Notes changed on disk: " + (paths(d.paths) || "several notes");
    case "head_moved": return "The notes' branch moved";
    case "proposal": return "A proposal is now " + (d.status || "changed");
    case "run": return d.status === "ended" ? "An agent run ended" : d.status === "started" ? "An agent run started" : null;
    case "sync": return "Synced with the remote";
    case "reset": return "Catching up with changes";
    default: return null;
  }
}

/** Something changed (`why`: words to announce, or null): redraw what differs. */
function changed(why) {
  folderCache.clear();
  if (why) say(why);
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
  waitForStream();
  if (!hub) stream(null);
}

/** This tab's own change stream, where there is no shared worker (GET /events read by fetch). */
async function stream(lastId) {
  let res;
  try {
    res = await fetch("/events", { headers: authHeaders(TOKEN, Object.assign({ Accept: "text/event-stream" },
      lastId ? { "Last-Event-ID": lastId } : {})), credentials: "omit", cache: "no-store" });
  } catch (_) {
    return setTimeout(() => stream(lastId), POLL_MS);
  }
  if (res.status !== 200 || !res.body) return streamState(false);
  streamState(true);
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
        let type = "message", id = null, data = "";
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (id) lastId = id;
        if (block.split(/\r?\n/).every((l) => l.startsWith(":"))) continue;
        let parsed = null;
        try { parsed = JSON.parse(data); } catch (_) { parsed = null; }
        changed(words(type, parsed));
      }
    }
  } catch (_) { /* reconnect below */ }
  streamState(false);
  setTimeout(() => stream(lastId), POLL_MS);
}

/** Without an open stream: index.status, repo.status and the pending proposals every 1.5 s. */
function poll() {
  if (polling) return;
  polling = true;
  let last = null;
  const tick = async () => {
    if (streamOpen) { polling = false; return; }
    if (!document.hidden) {
      try {
        const [i, r, p] = await Promise.all([api("/mcp/index/status"), api("/mcp/repo/status"),
          api("/mcp/proposals?" + q({ status: "pending", limit: 100 }))]);
        const now = JSON.stringify([r.data.head, i.data.notes_present, i.data.notes_changed_since,
          i.data.notes_indexed, p.data.proposals.map((x) => x.id)]);
        // The first look catches what changed between the view's load and now.
        if (last === null) changed(null);
        else if (now !== last) changed("Notes changed");
        last = now;
      } catch (_) { /* try again next tick */ }
    }
    setTimeout(tick, POLL_MS);
  };
  tick();
}

/**
 * Starts the page. Back from the provider at /ui/signed-in, the sign-in is
 * finished first: its access token kept (and shared with the other tabs) as
 * a typed token is, and the view it started from shown again.
 */
async function boot() {
  let back = null;
  let token = null;
  let trouble = null;
  if (location.pathname === signIn.PATH) {
    try {
      ({ token, back } = await signIn.finish());
    } catch (e) {
      trouble = e.message;
      back = "/ui/notes/";
    }
  }
  await joinHub();
  if (token) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(SIGNED_IN, "1");
    share(SIGNED_IN, "1");
    share(TOKEN, token);
  }
  if (back) history.replaceState(null, "", back);
  if (trouble) say(trouble);
  show(false);
}

boot();

