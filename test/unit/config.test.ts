// One case per failure mode, with the exact position and message an operator sees.
import { validateHeaderValue } from "node:http";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { checkConfig } from "../../src/config/checks.js";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { CALLER_ID, configSchema, PLAN_NAME, ROUTE_NAME } from "../../src/config/schema.js";
import type { TokenBucketSpec } from "../../src/limits/spec.js";
import { growthRatio } from "./support/growth.js";

const BASE = `listen: 127.0.0.1:8080
store:
  url: memory://
upstreams:
  api: http://127.0.0.1:3000
clients:
  - { id: acme, key: k1, plan: free, tenant: acme }
plans:
  free:
    global: { rate: 5/s, burst: 10 }
    routes:
      login: { limit: 5, window: 15m }
routes:
  - { name: login, match: { path: /login, methods: [POST] }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`;

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  const r = loadConfigText(yaml, "gw.yaml", env);
  if (r.ok) return [];
  return r.problems.map(formatProblem);
}

/** Errors and warnings in file order, as `tollgate --check` prints them. */
function report(yaml: string, env: Record<string, string> = {}): string[] {
  const r = loadConfigText(yaml, "gw.yaml", env);
  return [...(r.ok ? [] : r.problems), ...r.warnings]
    .sort((a, b) => a.line - b.line || a.column - b.column)
    .map(formatProblem);
}

describe("config loading", () => {
  // Found from outside: a value of a key that takes one of two shapes was reported as a bad
  // upstream URL, whatever the key.
  it("a bad value inside a key with two shapes names that value, not the upstream URL form", () => {
    expect(problems(`${BASE}identity:\n  auth_failures: { limit: 20, window: 60000 }\n`)).toEqual([
      "gw.yaml:17:39: identity.auth_failures.window: expected a duration such as 250ms, 5s, 15m, 1h or 1d",
    ]);
    expect(problems(BASE.replace("api: http://127.0.0.1:3000", "api: 42"))).toEqual([
      "gw.yaml:5:8: upstreams.api: expected a URL string or a mapping with url or targets, timeout, connect_timeout, connections",
    ]);
  });

  it("accepts the base config and compiles it", () => {
    const r = loadConfigText(BASE, "gw.yaml", {});
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
    expect(rt.routeList.map((x) => x.name)).toEqual(["login", "default"]);
    const limits = rt.plans.get("free")!.limitsByRoute.get("login")!;
    expect(
      limits.map((l) => [
        l.spec.name,
        (l.spec as TokenBucketSpec).burst,
        (l.spec as TokenBucketSpec).intervalMs,
      ]),
    ).toEqual([
      ["free.global", 10, 200],
      ["free.login", 5, 180_000],
    ]);
    expect(r.version).toMatch(/^[0-9a-f]{64}$/);
  });

  it("accepts the SPEC's example config apart from features not built yet", () => {
    expect(
      problems(
        BASE.replace("listen: 127.0.0.1:8080", "listen: 0.0.0.0:8080\nworkers: 1\nshutdown_grace: 10s"),
      ),
    ).toEqual([]);
  });

  it("points at a typo with the fix", () => {
    expect(problems(BASE.replace("global: { rate: 5/s", "global: { ratee: 5/s"))).toEqual([
      'gw.yaml:10:15: plans.free.global: unknown key "ratee"; did you mean "rate"?',
    ]);
  });

  it("points at a typo inside a mapping that may also be a scalar (a union) with the fix", () => {
    // auth_failures is `false | { limit, window }`, an upstream a URL or a mapping.
    const text = `${BASE}identity:\n  auth_failures: { limt: 5, window: 1m }\n`;
    expect(problems(text)).toEqual([
      'gw.yaml:17:20: identity.auth_failures: unknown key "limt"; did you mean "limit"?',
    ]);
    const upstream = BASE.replace(
      "  api: http://127.0.0.1:3000",
      '  api: { url: "http://127.0.0.1:3000", timeot: 5s }',
    );
    expect(problems(upstream)).toEqual([
      expect.stringMatching(
        /^gw\.yaml:\d+:\d+: upstreams\.api: unknown key "timeot"; did you mean "timeout"\?$/,
      ),
    ]);
  });

  it("points at an unknown top-level key", () => {
    expect(problems(`${BASE}listn: 1\n`)).toEqual([
      'gw.yaml:16:1: unknown key "listn"; did you mean "listen"?',
    ]);
  });

  it("reports YAML syntax errors with their position", () => {
    const out = problems(BASE.replace("  api: http://127.0.0.1:3000", "  api: [http://127.0.0.1:3000"));
    expect(out[0]).toMatch(/^gw\.yaml:\d+:\d+: /);
  });

  it("never quotes the file's text in a syntax error: a stray brace after a token leaks no secret", () => {
    const yaml = `listen: 127.0.0.1:8080
admin: { tokens: [{ name: ops, token: "\${OPS}" }}, { name: view, token: "viewer-secret-0123456789", scope: read }] }
upstreams: { api: http://127.0.0.1:3000 }
clients: [{ id: c, key: "\${KEY}", plan: p }]
plans: { p: { global: { rate: 1/s, burst: 1 } } }
routes: [{ name: d, match: { path: / }, upstream: api }]
`;
    const out = problems(yaml, { OPS: "env-ops-secret-0123456789", KEY: "env-client-key-0123" });
    const text = out.join("\n");
    for (const secret of ["viewer-secret", "env-ops-secret", "env-client-key"])
      expect(text).not.toContain(secret);
    // One bracket out of place: its first stray token stands for the 60-odd that follow it.
    expect(out.length).toBeLessThan(6);
    expect(text).toMatch(
      /^gw\.yaml:2:\d+: Unexpected [a-z-]+ token in YAML stream \(and \d+ more tokens after it\)$/m,
    );
  });

  it("an unresolved alias names its line, never its text: a secret written after a * stays out", () => {
    const yaml = BASE.replace(
      "  - { id: acme, key: k1, plan: free, tenant: acme }",
      "  - { id: c, key: *literal-secret-0123, plan: free }\n  - { id: d, key: ${KEY}, plan: free }",
    );
    const out = problems(yaml, { KEY: "*env-secret-4567" });
    expect(out.join("\n")).not.toMatch(/literal-secret|env-secret/);
    const line = yaml.split("\n").findIndex((l) => l.includes("*literal-secret")) + 1;
    expect(out[0]).toMatch(new RegExp(`^gw\\.yaml:${line}:\\d+: YAML anchors and aliases: Unresolved alias`));
  });

  it("refuses duplicate keys", () => {
    expect(
      problems(BASE.replace("listen: 127.0.0.1:8080", "listen: 127.0.0.1:8080\nlisten: 127.0.0.1:8081"))[0],
    ).toMatch(/^gw\.yaml:2:1: .*[Uu]nique/);
  });

  it("names a route's unknown upstream", () => {
    expect(
      problems(BASE.replace("methods: [POST] }, upstream: api", "methods: [POST] }, upstream: apj")),
    ).toEqual(['gw.yaml:14:72: routes[0].upstream: unknown upstream "apj" (did you mean "api"?)']);
  });

  it("names a plan's unknown route", () => {
    expect(problems(BASE.replace("      login: { limit", "      logn: { limit"))).toEqual([
      'gw.yaml:12:7: plans.free.routes: unknown route "logn" (did you mean "login"?)',
    ]);
  });

  it("names a client's unknown plan", () => {
    expect(problems(BASE.replace("plan: free, tenant", "plan: fre, tenant"))).toEqual([
      'gw.yaml:7:32: clients[0].plan: unknown plan "fre" (did you mean "free"?)',
    ]);
  });

  it("refuses duplicate names and duplicate matches", () => {
    const dup = BASE.replace("{ name: default, match: { path: / }", "{ name: login, match: { path: / }");
    expect(problems(dup)).toEqual(['gw.yaml:15:13: routes[1].name: duplicate route name "login"']);
    const same = `${BASE}  - { name: other, match: { path: /LOGIN/ }, upstream: api }\n  - { name: other2, match: { path: /login/, methods: [post] }, upstream: api }\n`;
    expect(problems(same)).toEqual([
      'gw.yaml:17:28: routes[3].match: matches the same requests as route "login", so one of them can never apply',
    ]);
  });

  it("refuses a bad duration and a bad rate with an example", () => {
    expect(problems(BASE.replace("window: 15m", "window: 15 minutes"))).toEqual([
      'gw.yaml:12:34: plans.free.routes.login.window: "15 minutes" is not a window; write a duration such as 15m, 1h or 30d, or a calendar period: 1 day, 1 week or 1 month',
    ]);
    expect(problems(BASE.replace("rate: 5/s", "rate: 5 per second"))[0]).toContain(
      "is not a rate; write it like 10/s",
    );
  });

  it("takes a leaky bucket as rate + queue and a concurrency limit as max_in_flight + lease", () => {
    const login = "      login: { limit: 5, window: 15m }";
    expect(
      problems(BASE.replace(login, "      login: { algorithm: leaky_bucket, rate: 5/s, queue: 3 }")),
    ).toEqual([]);
    expect(
      problems(BASE.replace(login, "      login: { algorithm: concurrency, max_in_flight: 2 }")),
    ).toEqual([]);
    expect(
      problems(BASE.replace(login, "      login: { algorithm: leaky_bucket, rate: 5/s, burst: 3 }")),
    ).toEqual([
      "gw.yaml:12:14: plans.free.routes.login: queue is missing: how many requests may wait (e.g. queue: 50)",
      "gw.yaml:12:52: plans.free.routes.login: burst does not apply to a leaky bucket (it takes rate + queue)",
    ]);
    expect(
      problems(BASE.replace(login, "      login: { algorithm: concurrency, limit: 2, lease: 0s }")),
    ).toEqual([
      "gw.yaml:12:14: plans.free.routes.login: max_in_flight is missing (e.g. max_in_flight: 2)",
      "gw.yaml:12:40: plans.free.routes.login: limit does not apply to a concurrency limit (it takes max_in_flight and lease)",
      "gw.yaml:12:50: plans.free.routes.login: lease must be longer than 0 (e.g. lease: 60s)",
    ]);
  });

  it("refuses a key that does not apply to the algorithm, never ignoring it", () => {
    const out = problems(
      BASE.replace(
        "      login: { limit: 5, window: 15m }",
        "      login: { algorithm: sliding_window, limit: 5, window: 15m, batch: 5 }",
      ),
    );
    expect(out).toEqual([
      "gw.yaml:12:66: plans.free.routes.login: batch does not apply to sliding_window (it takes limit + window)",
    ]);
    expect(
      problems(BASE.replace("listen: 127.0.0.1:8080", "listen: 127.0.0.1:8080\nworkers: auto"))[0],
    ).toContain("workers above 1 need a shared store");
  });

  it("refuses a cost no bucket could ever admit", () => {
    const out = problems(
      BASE.replace(
        "{ name: default, match: { path: / }, upstream: api }",
        "{ name: default, match: { path: / }, upstream: api, cost: 11 }",
      ),
    );
    expect(out).toEqual([
      'gw.yaml:10:13: plans.free.global: route "default" costs 11, more than this limit\'s 10: it could never be admitted',
    ]);
  });

  it("names a missing environment variable where it is used", () => {
    expect(problems(BASE.replace("url: memory://", "url: ${REDIS_URL}"))).toEqual([
      "gw.yaml:3:8: environment variable REDIS_URL is not set; set it, or give a default with ${REDIS_URL:-default}",
    ]);
  });

  it("reports positions in the file even after substitution shifted columns", () => {
    // The placeholder is longer than its value, on the same line as the error.
    const yaml = BASE.replace(
      "global: { rate: 5/s, burst: 10 }",
      "global: { rate: ${RATE}, burst: 10, extr: 1 }",
    );
    const line = yaml.split("\n")[9]!;
    expect(problems(yaml, { RATE: "5/s" })).toEqual([
      `gw.yaml:10:${line.indexOf("extr") + 1}: plans.free.global: unknown key "extr"; expected one of: algorithm, rate, burst, limit, window, shadow, unlimited, max_in_flight, lease, queue, batch, by, unit`,
    ]);
  });

  it("refuses a client with both or neither key forms, and bad CIDRs", () => {
    expect(problems(BASE.replace("key: k1,", "key: k1, key_sha256: " + "a".repeat(64) + ","))).toEqual([
      "gw.yaml:7:5: clients[0]: give exactly one of key_sha256 (recommended) or key",
    ]);
    expect(problems(`${BASE}identity: { trusted_proxies: [10.0.0.0/33] }\n`)).toEqual([
      'gw.yaml:16:31: identity.trusted_proxies[0]: "10.0.0.0/33" is not an IP address or CIDR such as 10.0.0.0/8 or ::1/128',
    ]);
  });

  it("tells a wrong type from a missing key", () => {
    expect(problems(BASE.replace("burst: 10", "burst: ten"))).toEqual([
      "gw.yaml:10:33: plans.free.global.burst: Invalid input: expected number, received string",
    ]);
  });

  it("store.replicas: only on Redis, and its wait shorter than store.timeout", () => {
    expect(
      problems(BASE.replace("  url: memory://\n", "  url: memory://\n  replicas: { wait: 1 }\n")),
    ).toEqual([
      expect.stringContaining(
        "store.replicas: store.replicas waits for Redis replicas, and memory:// has none",
      ),
    ]);
    expect(
      problems(
        BASE.replace(
          "  url: memory://\n",
          "  url: redis://127.0.0.1:6379\n  replicas: { wait: 1, timeout: 100ms }\n",
        ),
      ),
    ).toEqual([
      expect.stringContaining(
        "store.replicas.timeout: the replicas' wait (100ms) must be shorter than store.timeout (100ms)",
      ),
    ]);
    expect(
      problems(
        BASE.replace("  url: memory://\n", "  url: redis://127.0.0.1:6379\n  replicas: { wait: 1 }\n"),
      ),
    ).toEqual([]);
  });

  it("says which key is required when one is missing", () => {
    expect(problems(BASE.replace("store:\n  url: memory://\n", "store: {}\n"))).toEqual([
      "gw.yaml:2:8: store: store needs url (memory:// or redis://host:port), cluster or sentinel",
    ]);
    expect(
      problems(BASE.replace("  url: memory://\n", "  url: memory://\n  cluster: [redis://a:7000]\n")),
    ).toEqual(["gw.yaml:3:3: store: store takes one of url, cluster and sentinel, not url and cluster"]);
    expect(
      problems(
        BASE.replace("  url: memory://\n", "  cluster: [redis://10.0.0.1:7000, redis://10.0.0.2:7000]\n"),
      ),
    ).toEqual([]);
  });
});

describe("window algorithms", () => {
  it("compile limit + window", () => {
    const r = loadConfigText(
      BASE.replace(
        "login: { limit: 5, window: 15m }",
        "login: { algorithm: sliding_window, limit: 5, window: 15m }",
      ),
      "gw.yaml",
      {},
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
    expect(rt.plans.get("free")!.limitsByRoute.get("login")![1]!.spec).toEqual({
      algorithm: "sliding_window",
      name: "free.login",
      limit: 5,
      windowMs: 900_000,
    });
  });

  it("refuse keys that belong to a token bucket, and a missing window", () => {
    expect(
      problems(
        BASE.replace(
          "login: { limit: 5, window: 15m }",
          "login: { algorithm: fixed_window, limit: 5, burst: 5 }",
        ),
      ),
    ).toEqual([
      "gw.yaml:12:14: plans.free.routes.login: window is missing (e.g. window: 15m)",
      "gw.yaml:12:51: plans.free.routes.login: burst does not apply to fixed_window (it takes limit + window)",
    ]);
  });
});

describe("calendar windows", () => {
  const withLogin = (login: string, extra = "") =>
    BASE.replace("login: { limit: 5, window: 15m }", `login: ${login}`) + extra;
  const loginSpec = (yaml: string) => {
    const r = loadConfigText(yaml, "gw.yaml", {});
    if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
    const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
    return rt.plans.get("free")!.limitsByRoute.get("login")![1]!.spec;
  };

  it("window: 1 month on a fixed window counts per calendar month, in UTC unless calendar.tz says", () => {
    expect(loginSpec(withLogin("{ algorithm: fixed_window, limit: 5, window: 1 month }"))).toEqual({
      algorithm: "fixed_window",
      name: "free.login",
      limit: 5,
      windowMs: 2_592_000_000,
      calendar: { unit: "month", tz: "UTC" },
    });
    const berlin = withLogin(
      "{ algorithm: fixed_window, limit: 5, window: 1 days }",
      "calendar: { tz: Europe/Berlin }\n",
    );
    expect(loginSpec(berlin)).toMatchObject({
      windowMs: 86_400_000,
      calendar: { unit: "day", tz: "Europe/Berlin" },
    });
    expect(loginSpec(withLogin("{ algorithm: fixed_window, limit: 5, window: 1 week }"))).toMatchObject({
      windowMs: 604_800_000,
      calendar: { unit: "week", tz: "UTC" },
    });
    // 24h and 1d stay rolling durations, aligned on the epoch.
    expect(loginSpec(withLogin("{ algorithm: fixed_window, limit: 5, window: 1d }"))).not.toHaveProperty(
      "calendar",
    );
    // limit: 0 denies everything, and says when the period ends.
    expect(loginSpec(withLogin("{ algorithm: fixed_window, limit: 0, window: 1 month }"))).toMatchObject({
      limit: 0,
      calendar: { unit: "month", tz: "UTC" },
    });
  });

  it("refuses more than one period, naming what is allowed", () => {
    expect(problems(withLogin("{ algorithm: fixed_window, limit: 5, window: 2 months }"))).toEqual([
      'gw.yaml:12:59: plans.free.routes.login.window: "2 months" is not a window: a calendar window is one period, 1 day, 1 week or 1 month; for a rolling window write a duration such as 60d',
    ]);
  });

  it("refuses a calendar window on any other algorithm, with the fix", () => {
    expect(problems(withLogin("{ limit: 5, window: 1 month }"))).toEqual([
      "gw.yaml:12:26: plans.free.routes.login: window: 1 month is a calendar window, which only fixed_window counts (this limit is token_bucket, the default): add algorithm: fixed_window, or write a rolling window such as 30d",
    ]);
    expect(problems(withLogin("{ algorithm: sliding_window_counter, limit: 5, window: 1 day }"))).toEqual([
      "gw.yaml:12:61: plans.free.routes.login: window: 1 day is a calendar window, which only fixed_window counts (this limit is sliding_window_counter): add algorithm: fixed_window, or write a rolling window such as 1d",
    ]);
  });

  it("refuses a time zone Intl does not know, at its position, with the fix", () => {
    expect(problems(`${BASE}calendar:\n  tz: Europe/Berln\n`)).toEqual([
      'gw.yaml:17:7: calendar.tz: unknown time zone "Europe/Berln" (did you mean "Europe/Berlin"?): write an IANA name such as UTC, Europe/Berlin or America/New_York',
    ]);
    expect(problems(`${BASE}calendar: { tz: "+01:00" }\n`)).toEqual([
      'gw.yaml:16:17: calendar.tz: unknown time zone "+01:00": write an IANA name such as UTC, Europe/Berlin or America/New_York',
    ]);
  });

  it("says what alert_at takes: a percentage, or false", () => {
    expect(problems(`${BASE}calendar: { alert_at: 0.8 }\n`)).toEqual([
      "gw.yaml:16:23: calendar.alert_at: expected a share of the budget such as 80%, or false for no alerts",
    ]);
    expect(problems(`${BASE}calendar: { alert_at: 150% }\n`)).toHaveLength(1);
    expect(problems(`${BASE}calendar: { alert_at: false }\n`)).toEqual([]);
  });
});

describe("names that reach headers", () => {
  const CLIENT_ID_RULE =
    "may only hold letters, digits and . _ ~ @ + = : - / (1 to 256 of them): it is sent to the upstream in";
  const ROUTE_RULE =
    'a route name may only hold letters, digits, "_", "-" and "." (1 to 64 of them): it is sent to clients in the RateLimit headers';
  const PLAN_RULE =
    'a plan name may only hold letters, digits, "_" and "-" (1 to 64 of them): it is sent to clients in the RateLimit headers and to the upstream in Tollgate-Plan';

  it("refuses a client id or tenant that could inject a header", () => {
    const out = problems(
      BASE.replace(
        "{ id: acme, key: k1, plan: free, tenant: acme }",
        '{ id: "ac me", key: k1, plan: free, tenant: "x\\r\\nSet-Cookie: a=b" }',
      ),
    );
    expect(out).toEqual([
      `gw.yaml:7:11: clients[0].id: a client id ${CLIENT_ID_RULE} Tollgate-Client`,
      `gw.yaml:7:49: clients[0].tenant: a tenant ${CLIENT_ID_RULE} Tollgate-Tenant`,
    ]);
  });

  it("refuses client ids and tenants a header or a key could not carry", () => {
    // Non-Latin-1 cannot be sent in a header at all; braces would split the Redis hash tag.
    const out = problems(
      BASE.replace(
        "{ id: acme, key: k1, plan: free, tenant: acme }",
        '{ id: "検索", key: k1, plan: free, tenant: "a{b}" }',
      ),
    );
    expect(out).toEqual([
      `gw.yaml:7:11: clients[0].id: a client id ${CLIENT_ID_RULE} Tollgate-Client`,
      `gw.yaml:7:46: clients[0].tenant: a tenant ${CLIENT_ID_RULE} Tollgate-Tenant`,
    ]);
  });

  it("refuses a plan name that would break every RateLimit header, at the plan's key", () => {
    const yaml = BASE.replace("  free:\n", '  "p\\"q\\\\x":\n').replace("plan: free", 'plan: "p\\"q\\\\x"');
    expect(yaml.split("\n")[8]).toBe('  "p\\"q\\\\x":');
    expect(problems(yaml)).toEqual([`gw.yaml:9:3: plans: "p\\"q\\\\x" cannot be used: ${PLAN_RULE}`]);
  });

  it("refuses a plan name with a dot: it separates plan and route in a limit name", () => {
    const yaml = BASE.replace("  free:\n", "  free.v2:\n").replace("plan: free", "plan: free.v2");
    expect(problems(yaml)).toEqual([`gw.yaml:9:3: plans: "free.v2" cannot be used: ${PLAN_RULE}`]);
  });

  it("refuses a route name a header cannot carry, with its position", () => {
    expect(problems(BASE.replaceAll("login", "検索"))).toEqual([
      `gw.yaml:14:13: routes[0].name: ${ROUTE_RULE}`,
    ]);
    expect(problems(BASE.replace("name: default", 'name: "a\\"b"'))).toEqual([
      `gw.yaml:15:13: routes[1].name: ${ROUTE_RULE}`,
    ]);
    expect(problems(BASE.replace("name: default", `name: ${"r".repeat(65)}`))).toEqual([
      `gw.yaml:15:13: routes[1].name: ${ROUTE_RULE}`,
    ]);
  });

  it("accepts the names the examples use: letters, digits, - _ and a dot in route names", () => {
    const yaml = BASE.replaceAll("login", "password-reset.v2_beta").replaceAll("free", "Team_2-pro");
    expect(problems(yaml)).toEqual([]);
  });

  it("refuses an API key header that is not a header name", () => {
    expect(problems(`${BASE}identity: { api_key: { header: "x api key" } }\n`)).toEqual([
      "gw.yaml:16:32: identity.api_key.header: expected a header name such as x-api-key (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)",
    ]);
  });

  it("every name the schema accepts makes RateLimit headers Node can send and RFC 8941 can parse", () => {
    fc.assert(
      fc.property(fc.stringMatching(PLAN_NAME), fc.stringMatching(ROUTE_NAME), (plan, route) => {
        const name = `${plan}.${route}`;
        const value = `"${name}";r=1;t=1`;
        validateHeaderValue("ratelimit", value);
        // An sf-string holds printable ASCII, and " and \\ only escaped.
        expect(name).toMatch(/^[\x20-\x7e]+$/);
        expect(name).not.toMatch(/["\\]/);
      }),
    );
    fc.assert(
      fc.property(fc.stringMatching(CALLER_ID), (id) => {
        validateHeaderValue("tollgate-client", id);
        expect(id).not.toMatch(/[{}]/);
      }),
    );
  });
});

describe("loading a large config is linear", () => {
  const head = `listen: 127.0.0.1:8080
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000 }
`;

  /** n plans, each with a limit on its own one of n routes. */
  const plansTimesRoutes = (n: number) => {
    let yaml = `${head}plans:\n`;
    for (let p = 0; p < n; p++)
      yaml += `  plan-${p}: { global: { rate: 10/s, burst: 20 }, routes: { route-${p}: { limit: 5, window: 1m } } }\n`;
    yaml += "routes:\n";
    for (let r = 0; r < n; r++) yaml += `  - { name: route-${r}, match: { path: /r${r} }, upstream: api }\n`;
    return yaml;
  };

  it("2,000 plans times 2,000 routes are checked and compiled in time linear in plans plus routes", () => {
    // Every plan used to be compiled and checked against every route (4 million pairs: seconds
    // of a blocked event loop and a gigabyte of heap on each reload). Only the checks and the
    // compilation are measured: the YAML parser is linear but slow. No wall-clock bound (the
    // machine may be busy): 4 times the plans and the routes must cost about 4 times as much,
    // not 16 (support/growth.ts).
    const n = 2000;
    const yaml = plansTimesRoutes(n);
    const config = configSchema.parse(parseYaml(yaml));
    const checked = checkConfig(config);
    expect(checked.filter((p) => !p.warning)).toEqual([]);
    // No client names any of these plans: each is reported, once.
    expect(checked.length).toBe(n);
    const rt = compileRuntime(config, { file: "gw.yaml", version: "v" });
    const quarter = configSchema.parse(parseYaml(plansTimesRoutes(n / 4)));
    const checkAndCompile = (c: typeof config) => () => {
      checkConfig(c);
      compileRuntime(c, { file: "gw.yaml", version: "v" });
    };
    expect(growthRatio(checkAndCompile(quarter), checkAndCompile(config), 8)).toBeLessThan(8);
    expect(loadConfigText(yaml, "gw.yaml", {}).ok).toBe(true);
    // The lists are still there for every pair, built when asked, and the same list each time.
    const plan = rt.plans.get("plan-7")!;
    expect(plan.limitsByRoute.size).toBe(n);
    expect(plan.limitsByRoute.get("route-7")!.map((l) => l.spec.name)).toEqual([
      "plan-7.global",
      "plan-7.route-7",
    ]);
    expect(plan.limitsByRoute.get("route-8")!.map((l) => l.spec.name)).toEqual(["plan-7.global"]);
    expect(plan.limitsByRoute.get("route-8")).toBe(plan.limitsByRoute.get("route-8"));
    expect(plan.limitsByRoute.get("no-such-route")).toBeUndefined();
    expect(plan.limits.map((l) => l.spec.name)).toEqual(["plan-7.global", "plan-7.route-7"]);
  });

  it("a mapping of 25,000 keys loads in time linear in its keys, and a repeated key is still found", () => {
    // The YAML library's own duplicate-key check compares each key with every earlier one
    // (10 s for these 25,000). No wall-clock bound (the machine may be busy): 4 times the keys
    // must cost about 4 times as much, not 16 (support/growth.ts).
    const n = 25_000;
    const mapping = (keys: number) => {
      let yaml = `${head}routes: [{ name: default, match: { path: / }, upstream: api }]\nplans:\n`;
      for (let p = 0; p < keys; p++) yaml += `  p${p}: {}\n`;
      return yaml;
    };
    const yaml = mapping(n);
    expect(problems(yaml)).toEqual([]);
    const quarter = mapping(n / 4);
    expect(
      growthRatio(
        () => problems(quarter),
        () => problems(yaml),
        8,
      ),
    ).toBeLessThan(8);
    const lines = yaml.split("\n").length;
    expect(problems(`${yaml}  p17: {}\n`)).toEqual([`gw.yaml:${lines}:3: Map keys must be unique`]);
  });

  it("a route costlier than many plans' limits is named once per limit, with a count", () => {
    const yaml = BASE.replace(
      "{ name: default, match: { path: / }, upstream: api }",
      "{ name: default, match: { path: / }, upstream: api, cost: 11 }\n  - { name: big, match: { path: /big }, upstream: api, cost: 12 }\n  - { name: bigger, match: { path: /bigger }, upstream: api, cost: 12 }",
    );
    expect(problems(yaml)).toEqual([
      `gw.yaml:10:13: plans.free.global: route "big" costs 12, more than this limit's 10: it could never be admitted (and 2 more routes)`,
    ]);
  });
});

describe("a config that cannot lie (issue 20)", () => {
  const PATTERN_RULE =
    "looks like a pattern, but route paths are plain prefixes (no wildcards, parameters or regular expressions)";

  it("refuses an unknown method, with the method it looks like", () => {
    // Accepted, `POST /login` used to fall through to the catch-all route, with no login limit.
    expect(report(BASE.replace("methods: [POST]", "methods: [PSOT]"))).toEqual([
      'gw.yaml:14:53: routes[0].match.methods[0]: unknown method "PSOT" (did you mean "POST"?)',
    ]);
    expect(report(BASE.replace("methods: [POST]", "methods: [POST, BREW]"))).toEqual([
      'gw.yaml:14:59: routes[0].match.methods[1]: unknown method "BREW" (known: GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, PATCH)',
    ]);
    expect(report(BASE.replace("methods: [POST]", "methods: [CONNECT]"))).toEqual([
      "gw.yaml:14:53: routes[0].match.methods[0]: CONNECT requests never reach a route: the gateway does not tunnel CONNECT",
    ]);
    expect(
      report(BASE.replace("methods: [POST]", "methods: [post, Patch, DELETE, options, trace, put]")),
    ).toEqual([]);
  });

  it("refuses a path that looks like a glob, a template or a regex, and names the prefix to write", () => {
    // Accepted, "/login/*" was a literal prefix that no request ever matched.
    for (const [path, prefix] of <[string, string][]>[
      ["/login/*", "/login"],
      ["/login/**", "/login"],
      ["/login*", "/login"],
      ["/*", "/"],
      ["/users/{id}/orders", "/users"],
      ["/users/:id", "/users"],
      ["/v1/<model>", "/v1"],
      ["/api/v?/users", "/api"],
      ["/files/[a-z]*", "/files"],
      ["^/login", "/"],
      ["/login$", "/login"],
    ]) {
      const yaml = BASE.replace("path: /login,", `path: "${path}",`);
      const expected = path.startsWith("/")
        ? [
            `gw.yaml:14:35: routes[0].match.path: "${path}" ${PATTERN_RULE}: path: ${prefix} matches ${prefix} and every path below it`,
          ]
        : ["gw.yaml:14:35: routes[0].match.path: a route path starts with /"];
      expect(report(yaml), path).toEqual(expected);
    }
    // Characters a path may hold, and a colon inside a segment, are not patterns.
    expect(report(BASE.replace("path: /login,", 'path: "/v1/models/gemini:generate",'))).toEqual([]);
  });

  it("warns about a plan no caller can reach, and uses the file", () => {
    const yaml = BASE.replace(
      "\nroutes:\n  - { name: login",
      "\n  anonymus:\n    global: { rate: 1/s, burst: 5 }\nroutes:\n  - { name: login",
    );
    const r = loadConfigText(yaml, "gw.yaml", {});
    expect(r.ok).toBe(true);
    expect(r.warnings.map(formatProblem)).toEqual([
      'gw.yaml:13:3: warning: plans: plan "anonymus" is never used: no client has it (did you mean "anonymous", the plan of callers without a credential?)',
    ]);
    // Spelled right, it is the plan of callers without a credential.
    expect(report(yaml.replace("anonymus:", "anonymous:"))).toEqual([]);
  });

  it("counts a JWT's default plan, and every plan when tokens carry one, as reached", () => {
    const secret = "s".repeat(32);
    const yaml = `${BASE.replace("\nroutes:\n", "\n  partner:\n    global: { rate: 1/s, burst: 5 }\nroutes:\n")}identity:\n  jwt: { secret: ${secret}, default_plan: free }\n`;
    expect(report(yaml)).toEqual([
      'gw.yaml:13:3: warning: plans: plan "partner" is never used: no client has it and it is not identity.jwt.default_plan',
    ]);
    expect(report(yaml.replace("default_plan: free", "default_plan: partner"))).toEqual([]);
    expect(report(yaml.replace("default_plan: free", "claims: { plan: tier }"))).toEqual([]);
  });

  describe("routes another route shadows", () => {
    const head = `store: { url: "memory://" }\nupstreams: { api: http://127.0.0.1:3000 }\nroutes:\n`;
    /** `["page", "[GET]"]` is `- { name: page, match: { path: /page, methods: [GET] }, upstream: api }`. */
    const routes = (...list: [name: string, methods?: string][]) =>
      head +
      list
        .map(
          ([name, methods]) =>
            `  - { name: ${name}, match: { path: /page${methods ? `, methods: ${methods}` : ""} }, upstream: api }\n`,
        )
        .join("");

    it("sees that a GET route answers HEAD: a HEAD route after it on the same prefix never applies", () => {
      expect(report(routes(["page", "[GET]"], ["page-head", "[HEAD]"]))).toEqual([
        'gw.yaml:5:31: routes[1].match: matches the same requests as route "page" (a GET route answers HEAD too), so one of them can never apply',
      ]);
      // Listed first, the HEAD route takes HEAD and the GET route the rest: both apply.
      expect(report(routes(["page-head", "[HEAD]"], ["page", "[GET]"]))).toEqual([]);
      expect(report(routes(["page", "[GET]"], ["page-head", "[HEAD, PUT]"]))).toEqual([
        'gw.yaml:5:56: routes[1].match.methods[0]: HEAD requests to this path go to route "page" (a GET route answers HEAD too), never to this one',
      ]);
    });

    it("names every route that takes a shadowed route's methods, once per route", () => {
      expect(report(routes(["a", "[GET]"], ["b", "[POST]"], ["c", "[GET, POST]"]))).toEqual([
        'gw.yaml:6:23: routes[2].match: can never apply: route "a" takes GET, route "b" takes POST',
      ]);
      expect(report(routes(["a", "[GET, POST]"], ["b", "[POST, GET]"]))).toEqual([
        'gw.yaml:5:23: routes[1].match: matches the same requests as route "a", so one of them can never apply',
      ]);
    });

    it("follows the matcher: routes with methods come before a catch-all listed earlier", () => {
      expect(report(routes(["all"], ["post", "[POST]"]))).toEqual([]);
      expect(report(routes(["all"], ["again"]))).toEqual([
        'gw.yaml:5:27: routes[1].match: matches the same requests as route "all", so one of them can never apply',
      ]);
    });

    it("refuses an empty method list, which would match every method, and warns of a repeat", () => {
      expect(report(routes(["page", "[]"]))).toEqual([
        "gw.yaml:4:50: routes[0].match.methods: list at least one method, or leave methods out to match every method",
      ]);
      expect(report(routes(["page", "[GET, get]"]))).toEqual([
        "gw.yaml:4:56: warning: routes[0].match.methods[1]: GET is listed twice",
      ]);
    });

    it("warns when a path matches as another path once normalised", () => {
      expect(
        report(`${head}  - { name: page, match: { path: "/v1//search/./x;v=1" }, upstream: api }\n`),
      ).toEqual([
        'gw.yaml:4:34: warning: routes[0].match.path: "/v1//search/./x;v=1" matches requests as "/v1/search/x": request paths are normalized before matching (dot segments resolved, "//" merged, ";parameters" dropped); write "/v1/search/x"',
      ]);
      expect(report(`${head}  - { name: page, match: { path: /V1/Search/ }, upstream: api }\n`)).toEqual([]);
    });
  });

  describe("routes by host", () => {
    const head = `store: { url: "memory://" }\nupstreams: { api: http://127.0.0.1:3000 }\nroutes:\n`;
    /** `["a", "/a", "api.example.com"]` is `- { name: a, match: { path: /a, host: "api.example.com" }, upstream: api }`. */
    const routes = (...list: [name: string, path: string, host?: string, methods?: string][]) =>
      head +
      list
        .map(
          ([name, path, host, methods]) =>
            `  - { name: ${name}, match: { path: ${path}${host === undefined ? "" : `, host: ${JSON.stringify(host)}`}${methods ? `, methods: ${methods}` : ""} }, upstream: api }\n`,
        )
        .join("");
    const example = "write it like api.example.com, or *.example.com for every name below example.com";

    it.each([
      ["https://api.example.com", `a route host has no scheme: ${example}`],
      ["api.example.com/v1", `a route host has no path (match.path says which paths): ${example}`],
      [
        "api.example.com:8443",
        `a route host has no port: the Host header's port is ignored when matching; ${example}`,
      ],
      [
        "a.*.example.com",
        '"*" may only be a whole first label, as in *.example.com (every name below example.com)',
      ],
      ["*", '"*" alone would match every host: leave host out instead'],
      [
        "api..example.com",
        `"api..example.com" has an empty label (two dots in a row, or a leading dot): ${example}`,
      ],
      [
        "[::1]",
        "an IPv6 address cannot be a route host: it has many spellings, so a Host header could name it in one the route does not match; leave host out",
      ],
    ])("refuses the host %j with its position", (host, message) => {
      expect(report(routes(["a", "/a", host]))).toEqual([`gw.yaml:4:41: routes[0].match.host: ${message}`]);
    });

    it("refuses a host that is not a string", () => {
      expect(report(`${head}  - { name: a, match: { path: /a, host: [a.test] }, upstream: api }\n`)).toEqual([
        "gw.yaml:4:41: routes[0].match.host: expected a host such as api.example.com or *.example.com",
      ]);
    });

    it("accepts an exact host, a wildcard and a host-less route on one prefix, and compiles the host", () => {
      const yaml = routes(["a", "/a", "API.Example.com."], ["b", "/a", "*.example.com"], ["c", "/a"]);
      expect(report(yaml)).toEqual([]);
      const r = loadConfigText(yaml, "gw.yaml", {});
      if (!r.ok) throw new Error("refused");
      const rt = compileRuntime(r.config, { file: "gw.yaml", version: r.version });
      expect(rt.routeList.map((x) => x.host)).toEqual(["api.example.com", "*.example.com", null]);
      expect(rt.routes.match("/a/x", "GET", "api.example.com:8080")?.name).toBe("a");
      expect(rt.routes.match("/a/x", "GET", "www.example.com")?.name).toBe("b");
      expect(rt.routes.match("/a/x", "GET", "example.com")?.name).toBe("c");
    });

    it("refuses a route of the same host, prefix and methods as another, however the host is spelled", () => {
      expect(report(routes(["a", "/a", "api.example.com"], ["b", "/A/", "API.example.com."]))).toEqual([
        'gw.yaml:5:23: routes[1].match: matches the same requests as route "a", so one of them can never apply',
      ]);
      expect(
        report(routes(["a", "/a", "*.example.com", "[GET]"], ["b", "/a", "*.Example.com", "[GET, POST]"])),
      ).toEqual([
        'gw.yaml:5:68: routes[1].match.methods[0]: GET requests to this path go to route "a", never to this one',
      ]);
    });

    it("sees that routes of different hosts, or of a host and none, never shadow each other", () => {
      expect(
        report(
          routes(
            ["exact", "/a", "api.example.com"],
            ["wild", "/a", "*.example.com"],
            ["shorter", "/a", "*.com"],
            ["other", "/a", "other.example.com"],
            ["any", "/a"],
          ),
        ),
      ).toEqual([]);
    });
  });
});

describe("names that only an object's prototype has", () => {
  it("are unknown upstreams and plans, not ones the gateway would crash on", () => {
    expect(
      problems(
        BASE.replace("upstream: api }\n  - { name: default", "upstream: constructor }\n  - { name: default"),
      ),
    ).toEqual(['gw.yaml:14:72: routes[0].upstream: unknown upstream "constructor" (known: api)']);
    expect(problems(BASE.replace("plan: free, tenant", "plan: toString, tenant"))).toEqual([
      'gw.yaml:7:32: clients[0].plan: unknown plan "toString" (known: free)',
    ]);
  });
});

describe("every problem in one pass (issue 20)", () => {
  it("lists a typo in a plan, a route's unknown upstream and a client's unknown plan at once", () => {
    const yaml = BASE.replace("global: { rate: 5/s", "global: { ratee: 5/s")
      .replace("methods: [POST] }, upstream: api", "methods: [POST] }, upstream: apj")
      .replace("plan: free, tenant", "plan: fre, tenant");
    expect(report(yaml)).toEqual([
      'gw.yaml:7:32: clients[0].plan: unknown plan "fre" (did you mean "free"?)',
      'gw.yaml:10:15: plans.free.global: unknown key "ratee"; did you mean "rate"?',
      'gw.yaml:14:72: routes[0].upstream: unknown upstream "apj" (did you mean "api"?)',
    ]);
  });

  it("still checks the rest of a plan, a route or a client that has a schema error", () => {
    const yaml = BASE.replace("global: { rate: 5/s", "global: { ratee: 5/s")
      .replace("      login: { limit", "      logn: { limit")
      .replace(
        "{ name: default, match: { path: / }, upstream: api }",
        "{ name: default, match: { path: / }, upstream: apx, cost: x }",
      )
      .replace("plan: free, tenant: acme", 'plan: fre, tenant: "a b"');
    expect(report(yaml)).toEqual([
      'gw.yaml:7:32: clients[0].plan: unknown plan "fre" (did you mean "free"?)',
      "gw.yaml:7:45: clients[0].tenant: a tenant may only hold letters, digits and . _ ~ @ + = : - / (1 to 256 of them): it is sent to the upstream in Tollgate-Tenant",
      'gw.yaml:10:15: plans.free.global: unknown key "ratee"; did you mean "rate"?',
      'gw.yaml:12:7: plans.free.routes: unknown route "logn" (did you mean "login"?)',
      'gw.yaml:15:52: routes[1].upstream: unknown upstream "apx" (did you mean "api"?)',
      "gw.yaml:15:63: routes[1].cost: Invalid input: expected number, received string",
    ]);
  });

  it("does not call unknown what exists but has its own schema error", () => {
    // The route "login" fails (by), the upstream "api" fails (its URL), the plan "free" fails
    // (its name): what names them is not told they are unknown.
    const yaml = BASE.replace(
      "methods: [POST] }, upstream: api }",
      "methods: [POST] }, upstream: api, by: user }",
    )
      .replace("  api: http://127.0.0.1:3000", "  api: ftp://127.0.0.1:3000")
      .replace("  free:\n", "  free!:\n")
      .replace("plan: free,", "plan: free!,");
    expect(report(yaml)).toEqual([
      "gw.yaml:5:8: upstreams.api: expected an http:// or https:// URL",
      'gw.yaml:9:3: plans: "free!" cannot be used: a plan name may only hold letters, digits, "_" and "-" (1 to 64 of them): it is sent to clients in the RateLimit headers and to the upstream in Tollgate-Plan',
      'gw.yaml:14:81: routes[0].by: Invalid option: expected one of "ip"|"tenant"',
    ]);
    // A store with a typo is not also told it needs a url.
    expect(report(BASE.replace("  url: memory://", "  urll: memory://"))).toEqual([
      'gw.yaml:3:3: store: unknown key "urll"; did you mean "url"?',
    ]);
  });

  it("checks what validated beside a missing section", () => {
    const yaml = BASE.replace("store:\n  url: memory://\n", "").replace(
      "upstream: api }\n  - { name: default",
      "upstream: apx }\n  - { name: default",
    );
    expect(report(yaml)).toEqual([
      "gw.yaml:1:1: store is required",
      'gw.yaml:12:72: routes[0].upstream: unknown upstream "apx" (did you mean "api"?)',
    ]);
  });
});

describe("checking what passed beside what did not", () => {
  it("never throws, and positions every problem, whatever shape a section has", () => {
    const shapes = ["null", "1", "x", "[]", "{}", "[1]", "{ a: 1 }", "[{ a: 1 }]", "{ a: { b: [] } }"];
    const sections = [
      "store",
      "upstreams",
      "identity",
      "clients",
      "plans",
      "routes",
      "deny",
      "headers",
      "log",
    ];
    for (const section of sections) {
      for (const shape of shapes) {
        // The section replaced, and a typo elsewhere so that the file always fails the schema.
        const lines = BASE.replace("global: { rate: 5/s", "global: { ratee: 5/s").split("\n");
        const start = lines.findIndex((l) => l.startsWith(`${section}:`));
        let end = start + 1;
        while (start >= 0 && end < lines.length && /^\s/.test(lines[end]!)) end++;
        if (start >= 0) lines.splice(start, end - start, `${section}: ${shape}`);
        else lines.push(`${section}: ${shape}`);
        const r = loadConfigText(lines.join("\n"), "gw.yaml", {});
        expect(r.ok, `${section}: ${shape}`).toBe(false);
        if (r.ok) continue;
        for (const p of [...r.problems, ...r.warnings]) {
          expect(p.line, `${section}: ${shape}: ${formatProblem(p)}`).toBeGreaterThanOrEqual(1);
          expect(p.column).toBeGreaterThanOrEqual(1);
        }
      }
    }
  });
});
