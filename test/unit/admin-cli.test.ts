// `tollgate keys …` and `tollgate overrides …` without a socket: the words each command line
// becomes (one admin API request, or a usage error answered 64), the environment it needs
// (named precisely, never echoed), what it prints for people, and the whole command against a
// fake transport: the key on stdout once, the API's problem detail on stderr with exit 1, and the
// key and the admin token in no error.
import { describe, expect, it } from "vitest";
import { type AdminRequest, parseAdminCommand } from "../../src/cli/admin-args.js";
import { adminTarget, type Transport, whyUnreachable } from "../../src/cli/admin-client.js";
import { type AdminIo, refusal, runAdminCommand } from "../../src/cli/admin-command.js";
import { formatAnswer, printable, table } from "../../src/cli/admin-output.js";

const TOKEN = "ops-token-0123456789abcdef";
const KEY = "tg_q0Yl3wC4kD1bV9sXn7mJ2pZ8aHfT6uEoRiGyWcLdKsQ";
const ENV = { TOLLGATE_ADMIN_URL: "http://127.0.0.1:9090", TOLLGATE_ADMIN_TOKEN: TOKEN };

function request(argv: string[]): AdminRequest & { json: boolean } {
  const parsed = parseAdminCommand(argv);
  if (parsed.kind !== "command") throw new Error(`expected a command, got ${JSON.stringify(parsed)}`);
  return { ...parsed.command.request, json: parsed.command.json };
}

function usageOf(argv: string[]): string {
  const parsed = parseAdminCommand(argv);
  if (parsed.kind !== "usage") throw new Error(`expected a usage error, got ${JSON.stringify(parsed)}`);
  return parsed.message.split("\n")[0]!;
}

describe("parsing a command line", () => {
  it("keys create, list, revoke, rotate: method, path and body", () => {
    expect(
      request([
        "keys",
        "create",
        "--client",
        "acme",
        "--plan",
        "pro",
        "--tenant",
        "acme-inc",
        "--expires-in",
        "30d",
      ]),
    ).toEqual({
      method: "POST",
      path: "/admin/keys",
      body: { client: "acme", plan: "pro", tenant: "acme-inc", expires_in: "30d" },
      json: false,
    });
    expect(request(["keys", "create", "--plan=pro", "--client=acme", "--json"])).toEqual({
      method: "POST",
      path: "/admin/keys",
      body: { client: "acme", plan: "pro" },
      json: true,
    });
    expect(request(["keys", "list", "--client", "team/a b"])).toEqual({
      method: "GET",
      path: "/admin/keys?client=team%2Fa+b",
      json: false,
    });
    expect(request(["keys", "revoke", "key_abcdefghijkl"])).toEqual({
      method: "DELETE",
      path: "/admin/keys/key_abcdefghijkl",
      json: false,
    });
    expect(request(["keys", "rotate", "key_abcdefghijkl", "--grace", "2s", "--json"])).toEqual({
      method: "POST",
      path: "/admin/keys/key_abcdefghijkl/rotate",
      body: { grace: "2s" },
      json: true,
    });
    // No --grace: the API's default (0s), not one the CLI invents.
    expect(request(["keys", "rotate", "key_abcdefghijkl"]).body).toEqual({});
  });

  it("overrides set, list, delete: the caller and limit percent-encoded, sizes as JSON numbers", () => {
    expect(
      request([
        "overrides",
        "set",
        "client:team/a",
        "pro.global",
        "--burst",
        "2000",
        "--rate",
        "1000/s",
        "--expires-in",
        "7d",
        "--reason",
        "launch week",
      ]),
    ).toEqual({
      method: "PUT",
      path: "/admin/overrides/client%3Ateam%2Fa/pro.global",
      body: { burst: 2000, rate: "1000/s", expires_in: "7d", reason: "launch week" },
      json: false,
    });
    expect(
      request([
        "overrides",
        "set",
        "tenant:acme",
        "team.tenant",
        "--limit=0",
        "--window=1 month",
        "--max-in-flight",
        "3",
        "--lease",
        "30s",
        "--queue",
        "5",
        "--batch",
        "4",
        "--expires-in=1h",
        "--reason=clamp",
        "--json",
      ]).body,
    ).toEqual({
      limit: 0,
      window: "1 month",
      batch: 4,
      queue: 5,
      max_in_flight: 3,
      lease: "30s",
      expires_in: "1h",
      reason: "clamp",
    });
    expect(request(["overrides", "list", "client:acme"])).toEqual({
      method: "GET",
      path: "/admin/overrides/client%3Aacme",
      json: false,
    });
    expect(request(["overrides", "delete", "client:acme", "pro.global"])).toEqual({
      method: "DELETE",
      path: "/admin/overrides/client%3Aacme/pro.global",
      json: false,
    });
  });

  it("refuses a bad command line with the reason on its first line", () => {
    const set = ["overrides", "set", "client:a", "pro.global"];
    const cases: [string[], string][] = [
      [["keys"], "tollgate keys needs a command"],
      [["keys", "make"], 'unknown command "keys make": keys takes create, list, revoke, rotate'],
      [["overrides", "toString"], 'unknown command "overrides toString": overrides takes set, list, delete'],
      [["keys", "create", "--plan", "pro"], "keys create: give --client"],
      [["keys", "create"], "keys create: give --client and --plan"],
      [["keys", "create", "--client", "a", "--plan"], "keys create: --plan needs a value"],
      [["keys", "create", "--client", "--plan", "p"], "keys create: --client needs a value"],
      [["keys", "create", "--client=", "--plan", "p"], "keys create: --client needs a value"],
      [
        ["keys", "create", "--client", "a", "--client", "b", "--plan", "p"],
        "keys create: --client is given twice",
      ],
      [
        ["keys", "create", "--client", "a", "--plan", "p", "--limits", "{}"],
        'keys create: unknown argument "--limits"',
      ],
      [
        ["keys", "create", "--client", "a", "--plan", "p", "--json=yes"],
        "keys create: --json takes no value",
      ],
      [
        ["keys", "create", "--client", "a", "--plan", "p", "extra"],
        'keys create: unexpected argument "extra"',
      ],
      [["keys", "list", "--limit", "ten"], "keys list: --limit takes a whole number, e.g. --limit 20"],
      [["callers"], "callers: give CALLER"],
      [["callers", "client:a", "client:b"], 'callers: unexpected argument "client:b"'],
      [["denials", "--top"], "denials: --top needs a value"],
      [["usage", "client:a", "--format", "csv"], 'usage: unknown argument "--format"'],
      [["reset"], "reset: give CALLER"],
      [["reload", "now"], 'reload: unexpected argument "now"'],
      [["keys", "revoke"], "keys revoke: give ID"],
      [["keys", "revoke", "key_a", "key_b"], 'keys revoke: unexpected argument "key_b"'],
      [["keys", "rotate", "key_a", "--grace"], "keys rotate: --grace needs a value"],
      [["overrides", "set", "client:a"], "overrides set: give LIMIT"],
      [["overrides", "set"], "overrides set: give CALLER and LIMIT"],
      [[...set, "--burst", "20", "--reason", "r"], "overrides set: give --expires-in"],
      [[...set, "--burst", "20"], "overrides set: give --expires-in and --reason"],
      [
        [...set, "--expires-in", "1h", "--reason", "r"],
        "overrides set: give the new size: the limit's own keys that change, e.g. --burst 2000",
      ],
      [[...set, "--burst", "2.5"], "overrides set: --burst takes a whole number, e.g. --burst 20"],
      [[...set, "--limit", "1e3"], "overrides set: --limit takes a whole number, e.g. --limit 20"],
      [[...set, "--queue", "-1"], "overrides set: --queue takes a whole number, e.g. --queue 20"],
      [
        [...set, "--burst", "99999999999999999999"],
        "overrides set: --burst takes a whole number, e.g. --burst 20",
      ],
      [["overrides", "list"], "overrides list: give CALLER"],
      [["overrides", "delete", "client:a"], "overrides delete: give LIMIT"],
    ];
    for (const [argv, first] of cases) expect(usageOf(argv), argv.join(" ")).toBe(first);
    // The usage of the group follows, so the fix is on the screen.
    const whole = parseAdminCommand(["keys", "list", "--limit", "x"]);
    expect(whole.kind === "usage" && whole.message).toContain("usage: tollgate keys create --client ID");
  });

  it("callers, denials, usage, reset, reload, config and every key: method and path", () => {
    expect(request(["keys", "list"])).toEqual({ method: "GET", path: "/admin/keys", json: false });
    expect(request(["keys", "list", "--plan", "pro", "--limit", "20", "--cursor", "42"])).toEqual({
      method: "GET",
      path: "/admin/keys?plan=pro&limit=20&cursor=42",
      json: false,
    });
    expect(request(["callers", "client:team/a b", "--denials", "5", "--json"])).toEqual({
      method: "GET",
      path: "/admin/callers/client%3Ateam%2Fa%20b?limit=5",
      json: true,
    });
    expect(request(["callers", "client:bob", "--plan", "pro"])).toEqual({
      method: "GET",
      path: "/admin/callers/client%3Abob?plan=pro",
      json: false,
    });
    expect(request(["denials"])).toEqual({ method: "GET", path: "/admin/denials/top", json: false });
    expect(request(["denials", "--top", "3"])).toEqual({
      method: "GET",
      path: "/admin/denials/top?n=3",
      json: false,
    });
    expect(request(["denials", "--minutes", "5"])).toEqual({
      method: "GET",
      path: "/admin/denials/top?minutes=5",
      json: false,
    });
    expect(request(["usage", "tenant:acme", "--period", "2026-12"])).toEqual({
      method: "GET",
      path: "/admin/usage/tenant%3Aacme?period=2026-12",
      json: false,
    });
    expect(request(["reset", "ip:10.0.0.1"])).toEqual({
      method: "DELETE",
      path: "/admin/callers/ip%3A10.0.0.1",
      json: false,
    });
    expect(request(["reload"])).toEqual({ method: "POST", path: "/admin/reload", json: false });
    expect(request(["config", "--json"])).toEqual({ method: "GET", path: "/admin/config", json: true });
    for (const word of ["callers", "denials", "usage", "reset", "reload", "config"]) {
      const help = parseAdminCommand([word, "--help"]);
      expect(help.kind === "help" && help.text, word).toMatch(new RegExp(`^usage: tollgate ${word}`));
    }
  });

  it("answers --help (anywhere) and `help` with the group's usage", () => {
    for (const argv of [
      ["keys", "--help"],
      ["keys", "-h"],
      ["keys", "help"],
      ["keys", "create", "--help"],
      ["keys", "revoke", "--client", "x", "-h"],
    ]) {
      const parsed = parseAdminCommand(argv);
      expect(parsed.kind, argv.join(" ")).toBe("help");
      expect(parsed.kind === "help" && parsed.text).toMatch(
        /^usage: tollgate keys create .*\n {7}tollgate keys list/,
      );
    }
    const overrides = parseAdminCommand(["overrides", "--help"]);
    expect(overrides.kind === "help" && overrides.text).toContain("tollgate overrides set CALLER LIMIT");
    expect(overrides.kind === "help" && overrides.text).toContain("TOLLGATE_ADMIN_TOKEN");
  });
});

describe("the environment", () => {
  it("names each missing variable, on its own line", () => {
    expect(adminTarget({})).toEqual({
      ok: false,
      problems: [
        "TOLLGATE_ADMIN_URL is not set: the admin API's address, e.g. http://127.0.0.1:9090",
        "TOLLGATE_ADMIN_TOKEN is not set: one of the gateway's admin tokens (admin.tokens, or admin.token)",
      ],
    });
    expect(adminTarget({ ...ENV, TOLLGATE_ADMIN_TOKEN: "" })).toMatchObject({
      ok: false,
      problems: [expect.stringMatching(/^TOLLGATE_ADMIN_TOKEN is not set/)],
    });
  });

  it("refuses an unusable value without echoing it", () => {
    const secret = "hunter2-secret";
    const cases: [Record<string, string>, RegExp][] = [
      [
        { TOLLGATE_ADMIN_URL: `127.0.0.1:9090/${secret}` },
        /^TOLLGATE_ADMIN_URL is not an http:\/\/ or https:\/\/ URL/,
      ],
      [
        { TOLLGATE_ADMIN_URL: `ftp://h/${secret}` },
        /^TOLLGATE_ADMIN_URL is not an http:\/\/ or https:\/\/ URL/,
      ],
      [
        { TOLLGATE_ADMIN_URL: `http://ops:${secret}@h:9090` },
        /^TOLLGATE_ADMIN_URL must not carry credentials/,
      ],
      [{ TOLLGATE_ADMIN_URL: `http://h:9090/?t=${secret}` }, /^TOLLGATE_ADMIN_URL must not have a query/],
      [{ TOLLGATE_ADMIN_TOKEN: `${secret}\n` }, /^TOLLGATE_ADMIN_TOKEN holds a space, a control character/],
      [{ TOLLGATE_ADMIN_TOKEN: `${secret} x` }, /^TOLLGATE_ADMIN_TOKEN holds a space/],
      [{ TOLLGATE_ADMIN_TOKEN: `${secret}é` }, /^TOLLGATE_ADMIN_TOKEN holds .* a non-ASCII character/],
    ];
    for (const [env, problem] of cases) {
      const found = adminTarget({ ...ENV, ...env });
      expect(found.ok, JSON.stringify(env)).toBe(false);
      const problems = found.ok ? [] : found.problems;
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(problem);
      expect(problems[0]).not.toContain(secret);
    }
  });

  it("keeps a path prefix (a proxy in front) and drops trailing slashes", () => {
    expect(adminTarget(ENV)).toEqual({ ok: true, target: { base: "http://127.0.0.1:9090", token: TOKEN } });
    expect(adminTarget({ ...ENV, TOLLGATE_ADMIN_URL: "https://ops.example.com/tollgate//" })).toMatchObject({
      target: { base: "https://ops.example.com/tollgate" },
    });
  });
});

describe("what people read", () => {
  it("aligns columns, two spaces apart, with no trailing blanks", () => {
    expect(
      table(
        ["ID", "PLAN", "NOTE"],
        [
          ["key_a", "pro", ""],
          ["key_longer", "p", "x"],
        ],
      ),
    ).toBe("ID          PLAN  NOTE\nkey_a       pro\nkey_longer  p     x\n");
  });

  it("escapes control characters the API echoes (a terminal escape is shown, not obeyed)", () => {
    expect(printable("acme\u001b[2J\r\n\u009bx")).toBe("acme\\u001b[2J\\u000d\\u000a\\u009bx");
    // A right-to-left override would show the rest of the line reversed.
    expect(printable("x\u202e rtl\u2066")).toBe("x\\u202e rtl\\u2066");
    const out = formatAnswer("key-list", 200, [
      {
        id: "key_a",
        fingerprint: "9f86d081884c",
        client: "evil\u001b]0;pwned\u0007",
        plan: "pro",
        created_at: "t",
        expires_at: null,
      },
    ]);
    expect("stdout" in out && out.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
    expect("stdout" in out && out.stdout).toContain("evil\\u001b]0;pwned\\u0007");
  });

  it("prints an issued key once, with the warning that it is never shown again", () => {
    const out = formatAnswer("key-issued", 201, {
      id: "key_3xq7m2kd9wbn",
      key: KEY,
      fingerprint: "9f86d081884c",
      client: "acme",
      plan: "pro",
      tenant: "acme-inc",
      created_at: "2026-05-04T10:00:00.000Z",
      expires_at: "2026-08-02T10:00:00.000Z",
      warning: 'client "acme" is also in the YAML config, which wins',
    });
    expect(out).toEqual({
      stdout:
        "key_3xq7m2kd9wbn for client acme (plan pro, tenant acme-inc), expires 2026-08-02T10:00:00.000Z:\n\n" +
        `  ${KEY}\n\n` +
        "This is the only time the key is shown: store it now. The gateway keeps only its SHA-256 (fingerprint 9f86d081884c).\n",
      stderr: 'warning: client "acme" is also in the YAML config, which wins\n',
    });
    const rotated = formatAnswer("key-issued", 201, {
      id: "key_new",
      key: KEY,
      client: "acme",
      plan: "pro",
      expires_at: null,
      previous: { id: "key_old", expires_at: "2026-05-04T10:00:02.000Z" },
    });
    expect("stdout" in rotated && rotated.stdout).toMatch(
      /^key_new for client acme \(plan pro\), never expires:\n/,
    );
    expect("stdout" in rotated && rotated.stdout).toContain(
      "It replaces key_old, which works until 2026-05-04T10:00:02.000Z, then is refused.\n",
    );
    expect("stdout" in rotated && rotated.stdout.split(KEY).length).toBe(2);
  });

  it("lists keys as columns: fingerprint, never a key", () => {
    const out = formatAnswer("key-list", 200, [
      {
        id: "key_aaaaaaaaaaaa",
        fingerprint: "9f86d081884c",
        client: "acme",
        plan: "pro",
        tenant: "acme-inc",
        created_at: "2026-05-04T10:00:00.000Z",
        expires_at: "2026-08-02T10:00:00.000Z",
      },
      {
        id: "key_bbbbbbbbbbbb",
        fingerprint: "60303ae22b99",
        client: "acme",
        plan: "free",
        created_at: "2026-05-05T10:00:00.000Z",
        expires_at: null,
      },
    ]);
    expect(out).toEqual({
      stdout:
        "ID                FINGERPRINT   CLIENT  PLAN  TENANT    CREATED                   EXPIRES\n" +
        "key_aaaaaaaaaaaa  9f86d081884c  acme    pro   acme-inc  2026-05-04T10:00:00.000Z  2026-08-02T10:00:00.000Z\n" +
        "key_bbbbbbbbbbbb  60303ae22b99  acme    free  -         2026-05-05T10:00:00.000Z  never\n",
      stderr: "",
    });
    expect(formatAnswer("key-list", 200, [])).toEqual({
      stdout: "no keys (none issued, or all revoked or expired)\n",
      stderr: "",
    });
  });

  it("shows an override's size, expiry, reason and whether it applies", () => {
    const view = {
      name: "pro.global",
      caller: "client:acme",
      algorithm: "token_bucket",
      burst: 2000,
      rate: "1000/s",
      reason: "launch week",
      set_at: "2026-12-01T09:00:00.000Z",
      expires_at: "2026-12-08T09:00:00.000Z",
      applies: true,
      quota: 2000,
      description: '"pro.global" allows 2000 requests, refilled over 2s',
    };
    expect(formatAnswer("override-set", 201, view)).toEqual({
      stdout:
        "set: client:acme pro.global at burst 2000, rate 1000/s, expires 2026-12-08T09:00:00.000Z\n" +
        "  reason   launch week\n" +
        '  applies  "pro.global" allows 2000 requests, refilled over 2s\n',
      stderr: "",
    });
    const unapplied = {
      ...view,
      name: "pro.burst",
      applies: false,
      not_applied: 'the running config has no limit "pro.burst"',
    };
    for (const k of ["quota", "description"]) delete (unapplied as Record<string, unknown>)[k];
    const replaced = formatAnswer("override-set", 200, unapplied);
    expect("stdout" in replaced && replaced.stdout).toMatch(/^replaced: client:acme pro.burst at burst 2000/);
    expect("stderr" in replaced && replaced.stderr).toBe(
      'warning: the running config does not apply it: the running config has no limit "pro.burst"\n',
    );
    expect(
      formatAnswer("override-list", 200, { caller: "client:acme", overrides: [view, unapplied] }),
    ).toEqual({
      stdout:
        "LIMIT       SIZE                     EXPIRES                   APPLIES  REASON\n" +
        "pro.global  burst 2000, rate 1000/s  2026-12-08T09:00:00.000Z  yes      launch week\n" +
        "pro.burst   burst 2000, rate 1000/s  2026-12-08T09:00:00.000Z  no       launch week\n" +
        'pro.burst is not applied: the running config has no limit "pro.burst"\n',
      stderr: "",
    });
    expect(formatAnswer("override-list", 200, { caller: "client:acme", overrides: [] })).toEqual({
      stdout: "no overrides for client:acme\n",
      stderr: "",
    });
    expect(
      formatAnswer("override-removed", 200, { name: "pro.global", caller: "client:acme", removed: true }),
    ).toEqual({ stdout: "removed the override of pro.global for client:acme\n", stderr: "" });
    expect(formatAnswer("key-revoked", 200, { id: "key_a", client: "acme", revoked: true })).toEqual({
      stdout: "revoked key_a of client acme\n",
      stderr: "",
    });
  });

  it("a caller's limits and denials, usage, the top list, a reset, a reload and a page of keys", () => {
    const shown = formatAnswer("caller", 200, {
      caller: "client:evil\u001b[2J",
      plan: "pro",
      tenant: null,
      limits: [
        { name: "pro.global", limit: 100, remaining: 0, reset_seconds: 36, shadow: false },
        {
          name: "pro.chat",
          limit: 2000,
          remaining: 1500,
          reset_seconds: 1,
          runtime_override: { reason: "launch", expires_at: "2026-12-03T16:00:00.000Z" },
        },
      ],
      recent_denials: [{ time: "2026-12-03T15:00:01.000Z", route: "chat", limits: ["pro.global"] }],
    });
    expect(shown).toEqual({
      stdout: `client:evil\\u001b[2J (plan pro)

LIMIT       SIZE  REMAINING  RESET  NOTE
pro.global  100   0          36s    -
pro.chat    2000  1500       1s     override until 2026-12-03T16:00:00.000Z

DENIED AT                 ROUTE  LIMITS
2026-12-03T15:00:01.000Z  chat   pro.global
`,
      stderr: "",
    });
    expect(
      formatAnswer("denials-top", 200, {
        window_seconds: 3600,
        callers: [{ caller: "client:a", denials: 7 }],
      }),
    ).toEqual({
      stdout: "CALLER    DENIALS (LAST HOUR)\nclient:a  7\n",
      stderr: "",
    });
    expect(
      formatAnswer("usage-report", 200, {
        caller: "tenant:acme",
        period: "2026-12",
        limits: { "pro.tenant": { tokens: 1200, requests: 3, usd: 0.012 } },
      }),
    ).toEqual({
      stdout:
        "tenant:acme, 2026-12\n\nBUDGET      REQUESTS  TOKENS  USD\npro.tenant  3         1200    $0.012\n",
      stderr: "",
    });
    expect(formatAnswer("caller-reset", 200, { caller: "client:a", reset: true, keys_deleted: 3 })).toEqual({
      stdout: "reset client:a: 3 stored states forgotten\n",
      stderr: "",
    });
    expect(
      formatAnswer("reloaded", 200, {
        status: "reloaded",
        version: "v7",
        changed: true,
        restart_required: ["listen"],
      }),
    ).toEqual({
      stdout: "reloaded: version v7\n",
      stderr: "warning: these take effect only after a restart: listen\n",
    });
    const page = formatAnswer("key-list", 200, { keys: [], next_cursor: "1234" });
    expect(page).toEqual({
      stdout: "no keys (none issued, or all revoked or expired)\n",
      stderr: "more: tollgate keys list --cursor 1234\n",
    });
    expect(formatAnswer("config", 200, { a: "\u009b31m" })).toEqual({
      stdout: '{\n  "a": "\\u009b31m"\n}\n',
      stderr: "",
    });
  });

  it("a refused reload prints each problem of the file on a line of its own", () => {
    const line = refusal({
      kind: "answer",
      status: 400,
      contentType: "application/problem+json",
      text: JSON.stringify({
        type: "https://tollgate.dev/problems/config-refused",
        detail: "the config file was refused; the previous config keeps serving",
        errors: ['gw.yaml:3:9: plans.pro.global.rate: "fast" is not a rate', "gw.yaml:9:1: routes: required"],
      }),
    });
    expect(line).toBe(
      'the admin API refused (400 config-refused): the config file was refused; the previous config keeps serving\n  gw.yaml:3:9: plans.pro.global.rate: "fast" is not a rate\n  gw.yaml:9:1: routes: required',
    );
  });

  it("says an answer it cannot read is unreadable rather than printing half of it", () => {
    expect(formatAnswer("key-issued", 201, { id: "key_a" })).toEqual({
      unreadable: "no id, key and client in the answer",
    });
    expect(formatAnswer("key-list", 200, { keys: "none" })).toEqual({
      unreadable: "the answer is not a list of keys",
    });
    expect(formatAnswer("override-list", 200, [])).toEqual({
      unreadable: "no list of overrides in the answer",
    });
  });
});

interface Sent {
  url: string;
  init: Parameters<Transport>[1];
}

/** A fake transport answering `status` with `body`, recording what it was sent. */
function fakeApi(
  status: number,
  body: unknown,
  contentType = "application/json",
): {
  transport: Transport;
  sent: Sent[];
} {
  const sent: Sent[] = [];
  const transport: Transport = async (url, init) => {
    sent.push({ url, init });
    return { status, contentType, text: typeof body === "string" ? body : JSON.stringify(body) };
  };
  return { transport, sent };
}

async function run(argv: string[], io: Partial<AdminIo>) {
  let stdout = "";
  let stderr = "";
  const code = await runAdminCommand(argv, {
    env: ENV,
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    ...io,
  });
  // Whatever happened, neither the admin token nor the created key is in an error.
  expect(stderr).not.toContain(TOKEN);
  expect(stderr).not.toContain(KEY);
  return { code, stdout, stderr };
}

const problem = (status: number, code: string, detail: string) => ({
  type: `https://tollgate.dev/problems/${code}`,
  title: "t",
  status,
  detail,
});

describe("tollgate keys|overrides against a fake admin API", () => {
  const issued = {
    id: "key_3xq7m2kd9wbn",
    key: KEY,
    fingerprint: "9f86d081884c",
    client: "acme",
    plan: "pro",
    created_at: "2026-05-04T10:00:00.000Z",
    expires_at: null,
  };

  it("sends one request with the bearer token, a JSON body and a deadline", async () => {
    const api = fakeApi(201, issued);
    const r = await run(["keys", "create", "--client", "acme", "--plan", "pro", "--expires-in", "30d"], {
      transport: api.transport,
      env: { ...ENV, TOLLGATE_ADMIN_URL: "http://127.0.0.1:9090/" },
    });
    expect(r.code).toBe(0);
    expect(api.sent).toHaveLength(1);
    const [{ url, init }] = api.sent as [Sent];
    expect(url).toBe("http://127.0.0.1:9090/admin/keys");
    expect(init.method).toBe("POST");
    expect(init.headers).toMatchObject({
      authorization: `Bearer ${TOKEN}`,
      "content-type": "application/json",
    });
    expect(JSON.parse(String(init.body))).toEqual({ client: "acme", plan: "pro", expires_in: "30d" });
    expect(init.signal).toBeInstanceOf(AbortSignal);
    // The key on stdout, once; nothing on stderr.
    expect(r.stdout.split(KEY)).toHaveLength(2);
    expect(r.stdout).toContain("This is the only time the key is shown");
    expect(r.stderr).toBe("");
  });

  it("--json prints the API's answer as it is", async () => {
    const text = JSON.stringify(issued);
    const r = await run(["keys", "create", "--client", "acme", "--plan", "pro", "--json"], {
      transport: fakeApi(201, text).transport,
    });
    expect(r).toEqual({ code: 0, stdout: `${text}\n`, stderr: "" });
    const list = await run(["overrides", "list", "client:acme", "--json"], {
      transport: fakeApi(200, '{"caller":"client:acme","overrides":[]}\n').transport,
    });
    expect(list.stdout).toBe('{"caller":"client:acme","overrides":[]}\n');
  });

  it("a refusal: the problem's code and detail on stderr, exit 1, nothing on stdout", async () => {
    const r = await run(["keys", "revoke", "key_abcdefghijkl"], {
      transport: fakeApi(
        404,
        problem(
          404,
          "unknown-key-id",
          'no key has the id "key_abcdefghijkl" (revoked, expired, or never issued)',
        ),
        "application/problem+json",
      ).transport,
    });
    expect(r).toEqual({
      code: 1,
      stdout: "",
      stderr:
        'tollgate keys revoke: the admin API refused (404 unknown-key-id): no key has the id "key_abcdefghijkl" (revoked, expired, or never issued)\n',
    });
    const forbidden = await run(["overrides", "delete", "client:a", "pro.global"], {
      transport: fakeApi(
        403,
        problem(403, "insufficient-scope", 'the token "viewer" has scope read; DELETE needs scope write'),
        "application/problem+json",
      ).transport,
    });
    expect(forbidden.code).toBe(1);
    expect(forbidden.stderr).toBe(
      'tollgate overrides delete: the admin API refused (403 insufficient-scope): the token "viewer" has scope read; DELETE needs scope write\n',
    );
  });

  it("a 401 says which variables to check; a 5xx failed; a body that is no problem is not quoted", async () => {
    const r = await run(["keys", "list", "--client", "acme"], {
      transport: fakeApi(
        401,
        problem(401, "unauthorized", "send Authorization: Bearer <admin.token>"),
        "application/problem+json",
      ).transport,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "tollgate keys list: the admin API refused (401 unauthorized): send Authorization: Bearer <admin.token> (is TOLLGATE_ADMIN_TOKEN one of the gateway's admin tokens, and TOLLGATE_ADMIN_URL its admin listener?)\n",
    );
    const down = await run(["keys", "list", "--client", "acme"], {
      transport: fakeApi(
        503,
        problem(503, "temporary-reduced-capacity", "the store did not answer"),
        "application/problem+json",
      ).transport,
    });
    expect(down.stderr).toBe(
      "tollgate keys list: the admin API failed (503 temporary-reduced-capacity): the store did not answer\n",
    );
    const html = await run(["keys", "list", "--client", "acme"], {
      transport: fakeApi(502, `<html>${TOKEN}</html>`, "text/html").transport,
    });
    expect(html).toEqual({
      code: 1,
      stdout: "",
      stderr: "tollgate keys list: the admin API answered 502 without a problem detail\n",
    });
    const redirect = await run(["keys", "list", "--client", "acme"], {
      transport: fakeApi(302, "", "text/plain").transport,
    });
    expect(redirect.stderr).toContain("answered 302 without a problem detail (a redirect");
  });

  it("an answer it cannot read fails with exit 1 and points at --json", async () => {
    const r = await run(["keys", "list", "--client", "acme"], {
      transport: fakeApi(200, "not json", "text/plain").transport,
    });
    expect(r).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "tollgate keys list: the admin API at http://127.0.0.1:9090 answered 200, not as JSON: is it a tollgate of this version? (--json prints the answer as it is)\n",
    });
  });

  it("cannot reach the API: says why, exit 1; a timeout is named as one", async () => {
    // undici's error, its message naming where it connected to (here: the token, to see it is not read).
    const refused = Object.assign(new Error(`connect ECONNREFUSED ${TOKEN}`), { code: "ECONNREFUSED" });
    const r = await run(["keys", "list", "--client", "acme"], {
      transport: (async () => {
        throw refused;
      }) as Transport,
    });
    expect(r).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "tollgate keys list: cannot reach the admin API at http://127.0.0.1:9090: connection refused (is the gateway running, and is this its admin listener?) (ECONNREFUSED)\n",
    });
    const slow = await run(["keys", "list", "--client", "acme"], {
      timeoutMs: 10_000,
      transport: (async () => {
        throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
      }) as Transport,
    });
    expect(slow.stderr).toBe(
      "tollgate keys list: cannot reach the admin API at http://127.0.0.1:9090: no answer within 10 s\n",
    );
    // A message may quote the request: only the name and code are read, the cause's too (fetch's way).
    expect(
      whyUnreachable(new TypeError(`Headers.append: "${TOKEN}" is an invalid header value.`), 1000),
    ).toBe("the request failed before an answer");
    expect(whyUnreachable(Object.assign(new Error("x"), { code: "UND_ERR_HEADERS_TIMEOUT" }), 10_000)).toBe(
      "no answer within 10 s (UND_ERR_HEADERS_TIMEOUT)",
    );
    expect(
      whyUnreachable(
        Object.assign(new TypeError("fetch failed"), { cause: { code: "DEPTH_ZERO_SELF_SIGNED_CERT" } }),
        1000,
      ),
    ).toBe("TLS: the admin listener's certificate was not accepted (DEPTH_ZERO_SELF_SIGNED_CERT)");
  });

  it("bad usage is 64 and a missing variable 2, both before any request", async () => {
    const api = fakeApi(200, []);
    const usage = await run(["callers"], { transport: api.transport });
    expect(usage.code).toBe(64);
    expect(usage.stderr).toMatch(/^callers: give CALLER\n\nusage: tollgate callers/);
    const help = await run(["overrides", "--help"], { transport: api.transport, env: {} });
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: tollgate overrides set/);
    const env = await run(["keys", "list", "--client", "acme"], {
      transport: api.transport,
      env: { TOLLGATE_ADMIN_TOKEN: TOKEN },
    });
    expect(env).toEqual({
      code: 2,
      stdout: "",
      stderr:
        "tollgate keys list: TOLLGATE_ADMIN_URL is not set: the admin API's address, e.g. http://127.0.0.1:9090\n",
    });
    expect(api.sent).toEqual([]);
  });
});
