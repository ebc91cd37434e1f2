// The tollgate console: a page of the admin listener that calls the admin API with the session
// cookie it signed in for. No framework and no build: the browser runs this file as it ships.
//
// Everything the page shows that comes from the gateway (caller ids, reasons, route and limit
// names, audit targets: attacker-chosen, some of them) is put in the page as text nodes, never as
// HTML: nothing here hands the browser markup to parse, and the Content-Security-Policy allows
// no inline script.
// The admin token is sent once, to sign in, and kept nowhere: not in the URL, not in storage.

const CSRF_HEADER = "X-Tollgate-CSRF";
let session = null; // { name, scope, csrf }
let timer = null;

/** An element: `h("td", { class: "n" }, "text", child)`. Strings become text nodes. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function table(headers, rows, empty = "none") {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h(
    "table",
    {},
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((x) => h("th", {}, x)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((r) =>
        h(
          "tr",
          {},
          r.map((c) => h("td", {}, c)),
        ),
      ),
    ),
  );
}

const callerLink = (caller) =>
  h("a", { href: `#/caller/${encodeURIComponent(caller)}`, class: "caller" }, caller);

function status(text, kind = "info") {
  const footer = document.getElementById("status");
  footer.replaceChildren(h("span", { class: kind }, text));
}

/** The admin API, with the session cookie; writes carry the CSRF token. Throws the problem's detail. */
async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") headers[CSRF_HEADER] = session?.csrf ?? "";
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    if (res.status === 401) showSignIn();
    const err = new Error(json?.detail ?? `${res.status} ${res.statusText}`);
    err.problem = json;
    err.status = res.status;
    throw err;
  }
  return json ?? text;
}

const canWrite = () => session?.scope === "write";

function page(title, ...content) {
  document.getElementById("main").replaceChildren(h("h1", {}, title), ...content);
}

function every(ms, fn) {
  clearInterval(timer);
  timer = setInterval(() => fn().catch((e) => status(e.message, "error")), ms);
  return fn().catch((e) => status(e.message, "error"));
}

// ---- Now: who is being denied

async function nowPage() {
  const body = h("div", { id: "now" });
  page("Now: callers denied most", h("p", {}, "Across every instance, refreshed each second."), body);
  const first = new Map();
  await every(1000, async () => {
    const [top, recent, sustained] = await Promise.all([
      api("GET", "/admin/denials/top?n=20"),
      api("GET", "/admin/denials/top?n=1000&minutes=5"),
      api("GET", "/admin/denials/sustained"),
    ]);
    const lately = new Map(recent.callers.map((c) => [c.caller, c.denials]));
    for (const c of top.callers) if (!first.has(c.caller)) first.set(c.caller, c.denials);
    body.replaceChildren(
      table(
        ["caller", "denials, last hour", "these five minutes", "since this page opened"],
        top.callers.map((c) => [
          callerLink(c.caller),
          String(c.denials),
          String(lately.get(c.caller) ?? 0),
          String(c.denials - (first.get(c.caller) ?? c.denials)),
        ]),
        "no caller was denied in the last hour",
      ),
      h("h2", {}, "Denied without pause (sustained), on this instance"),
      table(
        ["caller", "denied since", "last denied"],
        sustained.callers.map((c) => [callerLink(c.caller), c.denied_since, c.last_denied]),
        "no caller is being denied without pause",
      ),
    );
    status(`updated ${new Date().toLocaleTimeString()}`);
  });
}

// ---- Caller: its limits, denials, usage, keys and overrides; actions with a write token

async function callerPage(caller) {
  const limits = h("section", { id: "limits" });
  const denials = h("section", { id: "denials" });
  const usage = h("section", { id: "usage" });
  const overrides = h("section", { id: "overrides" });
  const keys = h("section", { id: "keys" });
  const actions = h("section", { id: "actions" });
  page(`Caller ${caller}`, actions, limits, denials, usage, overrides, keys);
  const enc = encodeURIComponent(caller);
  let names = [];
  const refresh = async () => {
    const view = await api("GET", `/admin/callers/${enc}`);
    const all = [...view.limits, ...(view.keyed_limits ?? []), ...(view.shared_limits ?? [])];
    names = view.limits.map((l) => l);
    // The override form lists them as soon as they are known.
    document.getElementById("override-limit")?.dispatchEvent(new Event("focus"));
    limits.replaceChildren(
      h("h2", {}, `Limits (plan ${view.plan ?? "-"}${view.tenant ? `, tenant ${view.tenant}` : ""})`),
      table(
        ["limit", "size", "remaining", "resets in", "note"],
        all.map((l) => [
          l.name,
          String(l.limit),
          h("span", { class: l.remaining === 0 ? "spent" : "", "data-limit": l.name }, String(l.remaining)),
          `${l.reset_seconds}s`,
          l.runtime_override
            ? `override until ${l.runtime_override.expires_at}: ${l.runtime_override.reason}`
            : l.override
              ? "client override"
              : "",
        ]),
        "no limits apply",
      ),
    );
    denials.replaceChildren(
      h("h2", {}, "Recent denials, newest first"),
      table(
        ["time", "route", "limits"],
        view.recent_denials.map((d) => [d.time, d.route, d.limits.join(", ")]),
        "no denials in the last hour",
      ),
    );
    const used = await api("GET", `/admin/usage/${enc}`).catch(() => undefined);
    usage.replaceChildren(
      h("h2", {}, `Usage${used ? `, ${used.period}` : ""}`),
      used
        ? table(
            ["budget", "requests", "tokens", "usd"],
            Object.entries(used.limits).map(([n, t]) => [
              n,
              String(t.requests),
              String(t.tokens),
              t.usd === undefined ? "" : `$${t.usd}`,
            ]),
            "nothing used this period",
          )
        : h("p", { class: "empty" }, "no usage ledger"),
    );
    if (caller.startsWith("client:") || caller.startsWith("tenant:")) {
      const list = await api("GET", `/admin/overrides/${enc}`).catch(() => ({ overrides: [] }));
      overrides.replaceChildren(
        h("h2", {}, "Overrides"),
        table(
          ["limit", "expires", "reason", ""],
          list.overrides.map((o) => [
            o.name,
            o.expires_at,
            o.reason,
            canWrite()
              ? h(
                  "button",
                  {
                    class: "action",
                    onclick: () =>
                      act(
                        `End the override of ${o.name}?`,
                        () => api("DELETE", `/admin/overrides/${enc}/${encodeURIComponent(o.name)}`),
                        refresh,
                      ),
                  },
                  "end",
                )
              : "",
          ]),
          "no overrides",
        ),
      );
    }
    if (caller.startsWith("client:")) {
      const client = caller.slice("client:".length);
      const list = await api("GET", `/admin/keys?client=${encodeURIComponent(client)}`).catch(() => []);
      keys.replaceChildren(
        h("h2", {}, "Keys issued at runtime"),
        table(
          ["id", "fingerprint", "plan", "expires", ""],
          list.map((k) => [
            k.id,
            k.fingerprint,
            k.plan,
            k.expires_at ?? "never",
            canWrite()
              ? h(
                  "span",
                  {},
                  h(
                    "button",
                    {
                      class: "action",
                      onclick: () =>
                        act(
                          `Revoke ${k.id}? Requests with it are refused within a second.`,
                          () => api("DELETE", `/admin/keys/${encodeURIComponent(k.id)}`),
                          refresh,
                        ),
                    },
                    "revoke",
                  ),
                  h(
                    "button",
                    {
                      class: "action",
                      onclick: () =>
                        act(`Rotate ${k.id}? The new key is shown once.`, async () => {
                          const issued = await api(
                            "POST",
                            `/admin/keys/${encodeURIComponent(k.id)}/rotate`,
                            {},
                          );
                          keys.append(h("p", { class: "secret" }, `New key (shown once): ${issued.key}`));
                        }),
                    },
                    "rotate",
                  ),
                )
              : "",
          ]),
          "no keys issued at runtime",
        ),
      );
    }
  };
  if (canWrite()) actions.replaceChildren(actionForms(caller, () => names, refresh));
  await every(2000, refresh);
}

/** Asks, then does, then says what happened; the audit log records it on the gateway. */
async function act(question, run, after) {
  if (!window.confirm(question)) return;
  try {
    await run();
    status("done (recorded in the audit log)");
    if (after) await after();
  } catch (e) {
    status(e.message, "error");
  }
}

function actionForms(caller, limits, refresh) {
  const enc = encodeURIComponent(caller);
  const limit = h("select", { id: "override-limit", "aria-label": "limit" });
  const size = h("input", {
    id: "override-size",
    type: "number",
    min: "1",
    required: true,
    "aria-label": "new size",
    placeholder: "new size",
  });
  const expires = h("input", {
    id: "override-expires",
    required: true,
    value: "1h",
    "aria-label": "expires in",
  });
  const reason = h("input", {
    id: "override-reason",
    required: true,
    placeholder: "why (audited)",
    "aria-label": "reason",
  });
  const fill = () => {
    const current = limit.value;
    limit.replaceChildren(
      ...limits().map((l) =>
        h(
          "option",
          { value: l.name, selected: l.name === current },
          `${l.name} (${l.algorithm}, ${l.limit})`,
        ),
      ),
    );
  };
  limit.addEventListener("focus", fill);
  const override = h(
    "form",
    {
      id: "override",
      onsubmit: (e) => {
        e.preventDefault();
        fill();
        const chosen = limits().find((l) => l.name === limit.value);
        if (!chosen) return status("choose a limit", "error");
        const key =
          chosen.algorithm === "token_bucket"
            ? "burst"
            : chosen.algorithm === "concurrency"
              ? "max_in_flight"
              : "limit";
        act(
          `Set ${chosen.name} of ${caller} to ${size.value} for ${expires.value}?`,
          () =>
            api("PUT", `/admin/overrides/${enc}/${encodeURIComponent(chosen.name)}`, {
              [key]: Number(size.value),
              expires_in: expires.value,
              reason: reason.value,
            }),
          refresh,
        );
      },
    },
    h("h2", {}, "Override a limit for a while"),
    limit,
    size,
    expires,
    reason,
    h("button", { type: "submit" }, "Override"),
  );
  const reset = h(
    "button",
    {
      id: "reset",
      class: "action",
      onclick: () =>
        act(
          `Reset every limit of ${caller} on every instance?`,
          () => api("DELETE", `/admin/callers/${enc}`),
          refresh,
        ),
    },
    "Reset this caller",
  );
  return h("div", {}, reset, override);
}

// ---- Health: store, upstreams, config

async function healthPage() {
  const body = h("div", { id: "health" });
  const reload = h("section", { id: "reload" });
  page("Health", body, reload);
  if (canWrite()) {
    reload.replaceChildren(
      h(
        "button",
        {
          id: "reload-button",
          class: "action",
          onclick: () =>
            act("Read the config file again?", async () => {
              try {
                const r = await api("POST", "/admin/reload");
                reload.append(h("p", {}, `reloaded: version ${r.version}`));
              } catch (e) {
                reload.append(
                  h(
                    "div",
                    { class: "error" },
                    h("p", {}, e.message),
                    h(
                      "ul",
                      {},
                      (e.problem?.errors ?? []).map((x) => h("li", {}, x)),
                    ),
                  ),
                );
                throw e;
              }
            }),
        },
        "Reload the config",
      ),
    );
  }
  await every(2000, async () => {
    const ready = await fetch("/readyz").then((r) => r.json());
    const health = await api("GET", "/admin/health");
    const store = health.store;
    const last = health.last_reload;
    body.replaceChildren(
      table(
        ["", ""],
        [
          ["ready", `${ready.status}${ready.reason ? `: ${ready.reason}` : ""}`],
          ["store", store.address],
          ["store answers", store.reachable ? `yes, PING in ${store.ping_ms} ms` : `no: ${store.error}`],
          ["config file", health.config.file],
          ["config version", health.config.version],
          ["loaded at", health.config.loaded_at],
          [
            "last reload here",
            last ? `${last.at}: ${last.ok ? `version ${last.version}` : "refused"}` : "none since start",
          ],
        ],
      ),
      last && !last.ok
        ? h(
            "ul",
            { class: "error", id: "reload-errors" },
            last.errors.map((x) => h("li", {}, x)),
          )
        : "",
      h("h2", {}, "Breakers, per master"),
      table(
        ["master", "breaker"],
        store.breakers.map((b) => [
          b.shard,
          h("span", { class: b.state === "closed" ? "" : "spent" }, b.state),
        ]),
        "no check made yet",
      ),
      h("h2", {}, "Upstream targets"),
      table(
        ["upstream", "target", "state", "why"],
        health.upstreams.flatMap((u) =>
          u.targets.map((t) => [
            u.name,
            t.target,
            h(
              "span",
              { class: t.ejected ? "spent" : "" },
              t.ejected ? `ejected since ${t.since ?? "?"}` : "in rotation",
            ),
            t.ejected ? `${t.by === "requests" ? "failed requests" : "health check"}: ${t.reason ?? ""}` : "",
          ]),
        ),
        "no upstream",
      ),
    );
  });
}

// ---- Usage: per caller for a period, sortable, with the export

async function usagePage() {
  const month = new Date().toISOString().slice(0, 7);
  const period = h("input", { id: "period", value: month, "aria-label": "period" });
  const by = h(
    "select",
    { id: "by", "aria-label": "by" },
    h("option", { value: "client" }, "client"),
    h("option", { value: "tenant" }, "tenant"),
  );
  const body = h("div", { id: "usage-table" });
  const link = h("a", { id: "export" }, "billing export (CSV)");
  let sortKey = "caller";
  let rows = [];
  const draw = () => {
    const sorted = [...rows].sort((a, b) =>
      sortKey === "caller" ? (a.caller < b.caller ? -1 : 1) : (b[sortKey] ?? 0) - (a[sortKey] ?? 0),
    );
    body.replaceChildren(
      h(
        "table",
        {},
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["caller", "budget", "requests", "tokens", "usd"].map((k) =>
              h(
                "th",
                {
                  class: "sortable",
                  onclick: () => {
                    sortKey = k === "budget" ? "caller" : k;
                    draw();
                  },
                },
                k,
              ),
            ),
          ),
        ),
        h(
          "tbody",
          {},
          sorted.map((r) =>
            h(
              "tr",
              {},
              h("td", {}, callerLink(r.caller)),
              h("td", {}, r.budget),
              h("td", {}, String(r.requests)),
              h("td", {}, String(r.tokens)),
              h("td", {}, r.usd === undefined ? "" : `$${r.usd}`),
            ),
          ),
        ),
      ),
    );
  };
  const load = async () => {
    const q = new URLSearchParams({ period: period.value, by: by.value });
    link.setAttribute(
      "href",
      `/admin/usage/export?${new URLSearchParams({ period: period.value, by: by.value, format: "csv" })}`,
    );
    const page = await api("GET", `/admin/usage?${q}`);
    rows = page.callers.flatMap((c) =>
      Object.entries(c.limits).map(([budget, t]) => ({ caller: c.caller, budget, ...t })),
    );
    draw();
  };
  page(
    "Usage",
    h(
      "form",
      {
        onsubmit: (e) => {
          e.preventDefault();
          load().catch((x) => status(x.message, "error"));
        },
      },
      period,
      by,
      h("button", {}, "Show"),
    ),
    link,
    body,
  );
  clearInterval(timer);
  await load().catch((e) => status(e.message, "error"));
}

// ---- Audit: newest first, filterable

async function auditPage() {
  const filter = h("input", { id: "audit-filter", placeholder: "filter", "aria-label": "filter" });
  const body = h("div", { id: "audit" });
  let entries = [];
  const draw = () => {
    const f = filter.value.toLowerCase();
    const shown = entries.filter(
      (e) => !f || `${e.time} ${e.token} ${e.action} ${e.target}`.toLowerCase().includes(f),
    );
    body.replaceChildren(
      table(
        ["time", "token", "action", "target"],
        shown.map((e) => [e.time, e.token, e.action, e.target]),
        "no entries",
      ),
    );
  };
  filter.addEventListener("input", draw);
  page("Audit log, newest first", filter, body);
  await every(2000, async () => {
    const log = await api("GET", "/admin/audit");
    entries = [...log.entries].sort((a, b) => (a.time < b.time ? 1 : -1));
    draw();
  });
}

// ---- Signing in and out, and the routes

function showSignIn() {
  clearInterval(timer);
  session = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("who").textContent = "";
  const form = document.getElementById("sign-in") ?? signInForm();
  form.hidden = false;
  document.getElementById("main").replaceChildren(form);
}

function signInForm() {
  const token = h("input", {
    id: "token",
    type: "password",
    autocomplete: "off",
    "aria-label": "admin token",
    placeholder: "admin token",
  });
  const error = h("p", { id: "sign-in-error", class: "error" });
  return h("form", { id: "sign-in" }, h("h1", {}, "Sign in"), token, h("button", {}, "Sign in"), error);
}

async function signIn(token) {
  const res = await fetch("/admin/ui/session", {
    method: "POST",
    headers: { "content-type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ token }),
  });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(json.detail ?? `${res.status}`);
  return json;
}

function signedIn(s) {
  session = s;
  document.getElementById("nav").hidden = false;
  document.getElementById("sign-out").hidden = false;
  document.getElementById("who").textContent = `${s.name} (${s.scope})`;
  route();
}

function route() {
  if (!session) return showSignIn();
  const hash = location.hash || "#/now";
  const [, name, arg] = hash.match(/^#\/([a-z]+)(?:\/(.*))?$/) ?? [];
  status("");
  let caller = arg;
  try {
    caller = arg === undefined ? undefined : decodeURIComponent(arg);
  } catch {
    // A malformed escape in a link: shown as written, and the API says what is wrong with it.
  }
  const run =
    name === "caller" && caller
      ? callerPage(caller)
      : name === "health"
        ? healthPage()
        : name === "usage"
          ? usagePage()
          : name === "audit"
            ? auditPage()
            : nowPage();
  run.catch((e) => status(e.message, "error"));
}

document.addEventListener("submit", (e) => {
  if (e.target.id === "sign-in") {
    e.preventDefault();
    const input = document.getElementById("token");
    const token = input.value;
    input.value = "";
    signIn(token).then(signedIn, (err) => {
      document.getElementById("sign-in-error").textContent = err.message;
    });
  } else if (e.target.id === "find") {
    e.preventDefault();
    const caller = document.getElementById("find-caller").value.trim();
    if (caller) location.hash = `#/caller/${encodeURIComponent(caller)}`;
  }
});
document.getElementById("sign-out").addEventListener("click", async () => {
  await fetch("/admin/ui/session", {
    method: "DELETE",
    headers: { [CSRF_HEADER]: session?.csrf ?? "" },
    credentials: "same-origin",
  });
  showSignIn();
});
window.addEventListener("hashchange", route);

fetch("/admin/ui/session", { credentials: "same-origin" })
  .then((r) => (r.ok ? r.json() : null))
  .then((s) => (s ? signedIn(s) : showSignIn()), showSignIn);
