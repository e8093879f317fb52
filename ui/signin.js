// mirai's page signing in through the identity provider (when mirai has
// MIRAI_OAUTH_PAGE_CLIENT_ID): authorization code with PKCE (S256) as a public
// client, done here with WebCrypto. GET /oauth/page-client names the
// provider's endpoints, the client id, the scopes and the redirect URI
// (/ui/signed-in). While the person is at the provider, the verifier and the
// state wait in this tab's sessionStorage; back at /ui/signed-in the state is
// checked and the code traded for an access token at the token endpoint
// (the one origin the page's CSP lets it reach besides mirai). app.js keeps
// that token as it keeps a typed one.
"use strict";

const signIn = (() => {
  const FLOW = "mirai.signin"; // {state, verifier, back} while away at the provider
  const PATH = "/ui/signed-in";
  let client = null; // the promise of the page's client (null inside: no sign-in here)

  function base64url(bytes) {
    let text = "";
    for (const b of bytes) text += String.fromCharCode(b);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function random(n) {
    const bytes = new Uint8Array(n);
    crypto.getRandomValues(bytes);
    return base64url(bytes);
  }

  async function challengeOf(verifier) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
    return base64url(new Uint8Array(digest));
  }

  /** The page's client (GET /oauth/page-client), or null when this mirai has no sign-in. */
  function config() {
    if (!client) {
      client = fetch("/oauth/page-client", { headers: { Accept: "application/json" }, credentials: "omit", cache: "no-store" })
        .then((res) => (res.ok ? res.json() : null))
        .catch(() => null);
    }
    return client;
  }

  /** Goes to the provider to sign in; comes back to /ui/signed-in, then to where it was. */
  async function start() {
    const c = await config();
    if (!c || !window.crypto || !crypto.subtle) return false;
    const verifier = random(48);
    const state = random(24);
    const here = location.pathname + location.search + location.hash;
    const back = location.pathname === PATH ? "/ui/notes/" : here;
    sessionStorage.setItem(FLOW, JSON.stringify({ state, verifier, back }));
    const url = new URL(c.authorization_endpoint);
    const params = {
      response_type: "code", client_id: c.client_id, redirect_uri: c.redirect_uri,
      scope: c.scopes.join(" "), state, code_challenge: await challengeOf(verifier),
      code_challenge_method: "S256", resource: c.resource,
    };
    for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
    location.assign(url.toString());
    return true;
  }

  /**
   * Back from the provider at /ui/signed-in: the state checked, the code
   * traded. Resolves to {token, back}; rejects with a sentence to show.
   */
  async function finish() {
    const params = new URLSearchParams(location.search);
    let flow = null;
    try { flow = JSON.parse(sessionStorage.getItem(FLOW) || "null"); } catch (_) { flow = null; }
    sessionStorage.removeItem(FLOW);
    if (params.get("error")) {
      throw new Error("The identity provider did not sign you in: " + (params.get("error_description") || params.get("error")) + ".");
    }
    if (!flow || !params.get("state") || params.get("state") !== flow.state) {
      throw new Error("This sign-in was not started from this tab: sign in again.");
    }
    const c = await config();
    if (!c) throw new Error("This mirai no longer offers sign-in: use a token.");
    const body = new URLSearchParams({
      grant_type: "authorization_code", code: params.get("code") || "", redirect_uri: c.redirect_uri,
      client_id: c.client_id, code_verifier: flow.verifier, resource: c.resource,
    });
    let res;
    try {
      res = await fetch(c.token_endpoint, { method: "POST", body, headers: { Accept: "application/json" }, credentials: "omit", cache: "no-store" });
    } catch (_) {
      throw new Error("The identity provider's token endpoint could not be reached: sign in again.");
    }
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    if (!res.ok || !data || typeof data.access_token !== "string") {
      const why = (data && (data.error_description || data.error)) || "status " + res.status;
      throw new Error("The identity provider refused the sign-in (" + why + "): sign in again.");
    }
    return { token: data.access_token, back: flow.back || "/ui/notes/" };
  }

  return { config, start, finish, PATH };
})();
