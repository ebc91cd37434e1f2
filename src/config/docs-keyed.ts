// The hand-written part of docs/configuration.md on route limits and `by`, which the generated
// reference (docs.ts) ends with. The example is the README's too, and a test holds both copies
// to it and runs it through `--check` (test/unit/key-checks.test.ts).

/** A complete file with route limits, keyed limits and a client override; it passes `--check`. */
export const KEYED_LIMITS_EXAMPLE = `store: { url: redis://redis:6379 }
upstreams: { api: http://api.internal:8080 }
routes:
  - name: search
    match: { path: /v1/search, host: api.example.com } # host: exact or *.example.com; optional
    upstream: api
    trusted_headers: [x-org-id] # set by the auth proxy in front; refused from anyone else
    limits: # route limits: apply to every caller, whatever the plan
      total: { rate: 500/s, burst: 1000, by: route } # named search.total
      per-org: { rate: 50/s, burst: 100, by: "header:x-org-id" } # named search.per-org
  - { name: reports, match: { path: /v1/reports }, upstream: api }
  - { name: models, match: { path: /v1/models }, upstream: api }
clients:
  - id: acme-prod
    key_sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    plan: pro
    limits: { global: { rate: 500/s, burst: 1000 } } # overrides pro.global for this client only
  - id: dev-laptop
    key_sha256: "486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7"
    plan: free
plans:
  pro:
    global: { rate: 50/s, burst: 100 }
  free:
    routes:
      reports: { limit: 10, window: 1m, by: [caller, "segment:3"] } # /v1/reports/{id}: per caller and report
      models: { limit: 100, window: 1h, by: [caller, "header:x-model"] } # per caller and model
`;

export const KEYED_LIMITS_DOC = `## Route limits and \`by\`

\`routes[].limits.<name>\` takes a limit (the keys above) that applies to every caller of the
route, whatever its plan: clients, JWT callers, and anonymous callers (under \`plans.anonymous\`
when it exists; with neither clients nor \`identity.jwt\`, anonymous callers have no plan and only
route limits apply to them). It is named \`<route>.<name>\` (\`search.total\`) and checked after
the plan's limits, in the same single check: a request one limit denies takes nothing from the
others. \`exempt\` callers skip every limit, route limits included. A route limit may not share
its name with a plan limit (route \`pro\`'s limit \`global\` and plan \`pro\`'s \`global\`): they
would share headers and state, and \`--check\` says which to rename.

\`by\` says what one budget is kept per, on any limit: a plan's \`global\`, \`tenant\` and route
entries, and route limits. One budget per:

- \`caller\`: the client; an anonymous caller's address. The default of plan limits.
- \`tenant\`: the tenant. The default of a plan's \`tenant\` limit, whose \`by\` must include it.
- \`ip\`: the client address, as \`identity.trusted_proxies\` resolves it (IPv6: per
  \`identity.ipv6_prefix\`).
- \`route\`: the route, one budget every caller shares (on a plan's limit, every caller of the
  plan). The default of route limits.
- \`header:<name>\`: the value of that request header.
- \`query:<name>\`: the value of that query parameter, decoded.
- \`claim:<name>\`: the value of that claim of the caller's verified JWT (a string, number or
  boolean).
- \`segment:<n>\`: the n-th segment of the normalised path, from 1: of \`/v1/reports/r-17\`,
  \`segment:3\` is \`r-17\`.
- A list, \`[caller, "header:x-model"]\`: each combination of values (each caller's budget for
  each model); each part at most once.

How a request's values are read and kept:

- A request that lacks a value (no such header, an empty one, a shorter path, a caller without
  a JWT for \`claim:\`, a caller without a tenant for \`tenant\`) is counted under its caller for
  that part, never skipped: leaving a header out lands in a budget of the caller's own.
- Values are bounded in state keys: one of printable ASCII up to 64 characters is written as it
  is, with \`{\`, \`}\`, \`:\`, \`%\` and \`#\` escaped as \`%xx\`; a longer one, or one holding spaces,
  controls or non-ASCII, is hashed (\`#\` and 22 characters of its SHA-256). No value can break the
  key layout, pass for another part's value, or grow a key past about 200 characters.
- A request that carries a header or query parameter some limit of its route keys by more than
  once, or a keyed header holding a comma-separated list (\`x-org-id: acme, acme\`), is refused
  with \`400\`: an upstream may read either copy. A field whose one value holds commas
  (\`user-agent\`, \`referer\`, dates) is read whole.
- \`routes[].trusted_headers\` lists headers a trusted proxy in front sets (an auth service's
  \`x-org-id\`): a request carrying one from an address outside \`identity.trusted_proxies\` is
  refused with \`400\`, so its value is the proxy's, never the client's.
- A header, query parameter or path segment is whatever the client sends, so a limit keyed by one
  alone is kept per value, not per client: changing the value gets a fresh budget, and copying
  another organisation's value spends that organisation's budget. \`[caller, "header:x-org-id"]\`
  keeps any client from spending another's; a limit kept per caller (the plan's \`global\`) is what
  bounds one client whatever values it sends. Claims come only from JWTs the gateway verified.
- \`routes[].by: ip | tenant\` still keys the plans' entries for that route; a limit's own \`by\`
  wins.
- A client's \`limits\` size the plan's limits for that client only, and only limits kept per
  caller (a \`by\` with a \`caller\` part, or the default): the others are budgets several callers
  share. An override takes no \`by\`: the limit stays keyed as the plan says.

\`--check\` refuses, at the position, with the fix: a \`claim:\` part without \`identity.jwt\`; a
\`segment:<n>\` within the route's path prefix (route \`/v1/reports\`: \`segment:1\` and
\`segment:2\` are the same in every request, \`segment:3\` is the first that varies); a header name
that is not a token; a credential header (\`authorization\`, the API key header), whose values
would become state keys; a plan's \`tenant\` limit without a \`tenant\` part; a \`by\` in a
client's \`limits\`, and an override of a budget callers share. It warns of a \`by\` made only
of what the client writes (headers, query parameters, body fields, and on a plan's limits path
segments), which a client evades by writing another value, unless each header is in the
route's \`trusted_headers\`; \`body:model\` on an AI route keys by the model the upstream runs
and bills, and a route limit's \`segment:\` by the resource it serves, so neither is warned of.

The contract in one file (it passes \`tollgate --check\`; a test checks the copy on this page):

\`\`\`yaml
${KEYED_LIMITS_EXAMPLE}\`\`\`
`;
