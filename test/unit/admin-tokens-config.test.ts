// admin.tokens and admin.audit_retention in the YAML: what they compile to, and one case per
// failure mode with the exact position and message an operator sees, none of them showing a token.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";

const BASE = `store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:3000 }
routes: [{ name: default, match: { path: / }, upstream: api }]
`;

function load(yaml: string, env: Record<string, string> = {}) {
  return loadConfigText(BASE + yaml, "gw.yaml", env);
}

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  const r = load(yaml, env);
  return r.ok ? [] : r.problems.map(formatProblem);
}

function compiled(yaml: string, env: Record<string, string> = {}) {
  const r = load(yaml, env);
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: r.version }).admin;
}

const named = (admin: ReturnType<typeof compiled>) => admin.tokens.map((t) => `${t.name}:${t.scope}`);

describe("admin.tokens", () => {
  it("compiles each token with its name and scope, ${VAR} substituted", () => {
    const admin = compiled(
      `admin:
  tokens:
    - { name: ops, token: "\${OPS_TOKEN}", scope: write }
    - { name: viewer, token: viewer-literal-token, scope: read }
`,
      { OPS_TOKEN: "from-the-environment" },
    );
    expect(named(admin)).toEqual(["ops:write", "viewer:read"]);
    expect(admin.tokens[0]!.digest).toEqual(
      compiled(`admin: { tokens: [{ name: x, token: from-the-environment, scope: read }] }\n`).tokens[0]!
        .digest,
    );
  });

  it("admin.token keeps working as one write token named admin; none without either", () => {
    expect(named(compiled(`admin: { token: "\${ADMIN_TOKEN}" }\n`, { ADMIN_TOKEN: "t" }))).toEqual([
      "admin:write",
    ]);
    expect(named(compiled(`admin: { token: "" }\n`))).toEqual([]);
    expect(named(compiled(""))).toEqual([]);
    expect(named(compiled(`admin: { tokens: [] }\n`))).toEqual([]);
  });

  it("refuses both forms at once, at admin.token, with the fix", () => {
    expect(
      problems(`admin:\n  token: t0\n  tokens:\n    - { name: ops, token: t1, scope: write }\n`),
    ).toEqual([
      "gw.yaml:5:3: admin: admin.token and admin.tokens are both given: move the token into admin.tokens as { name: admin, token: …, scope: write } and remove admin.token",
    ]);
  });

  it("refuses a name or a token given twice, naming the other entry and never the token", () => {
    const found = problems(`admin:
  tokens:
    - { name: ops, token: secret-one, scope: write }
    - { name: ops, token: secret-two, scope: read }
    - { name: ci, token: secret-one, scope: read }
`);
    expect(found).toEqual([
      'gw.yaml:7:15: admin.tokens[1].name: duplicate token name "ops" (also admin.tokens[0]): the audit log would not tell them apart',
      'gw.yaml:8:26: admin.tokens[2].token: the same token as admin.tokens[0] ("ops"): give each name its own token, so the audit log can tell who acted',
    ]);
    expect(found.join("\n")).not.toMatch(/secret-/);
  });

  it("refuses an empty token (a variable set to nothing) at its position", () => {
    expect(
      problems(`admin:\n  tokens:\n    - { name: ops, token: "\${OPS_TOKEN:-}", scope: write }\n`),
    ).toEqual([
      "gw.yaml:6:27: admin.tokens[0].token: the token is empty: set the variable it comes from, or remove this entry",
    ]);
    expect(
      problems(`admin:\n  tokens:\n    - { name: ops, token: "\${OPS_TOKEN}", scope: write }\n`, {
        OPS_TOKEN: "",
      }),
    ).toEqual([
      "gw.yaml:6:27: admin.tokens[0].token: the token is empty: set the variable it comes from, or remove this entry",
    ]);
  });

  it("names an unset variable where it is used", () => {
    expect(
      problems(`admin:\n  tokens:\n    - { name: ops, token: "\${OPS_TOKEN}", scope: write }\n`),
    ).toEqual([
      "gw.yaml:6:28: environment variable OPS_TOKEN is not set; set it, or give a default with ${OPS_TOKEN:-default}",
    ]);
  });

  it("refuses a bad name, a bad or missing scope, a token that is not a string, an unknown key", () => {
    expect(
      problems(`admin:
  tokens:
    - { name: "o ps", token: x1, scope: admin }
    - { name: ci, token: x2 }
    - { name: ci2, token: 42, scope: read }
    - { name: ci3, token: x3, scope: read, extra: 1 }
`),
    ).toEqual([
      'gw.yaml:6:15: admin.tokens[0].name: a token name starts with a letter or digit and holds only letters, digits, ".", "_" and "-" (1 to 64 of them): the audit log and the logs show it',
      "gw.yaml:6:41: admin.tokens[0].scope: expected read or write",
      "gw.yaml:7:7: admin.tokens[1].scope: scope is required: read or write",
      "gw.yaml:8:27: admin.tokens[2].token: expected the token as a string, e.g. ${OPS_TOKEN}",
      'gw.yaml:9:44: admin.tokens[3]: unknown key "extra"',
    ]);
  });
});

describe("admin.audit_retention", () => {
  it("is 30 days unless written, a duration from 1s to ten years", () => {
    expect(compiled("").auditRetentionMs).toBe(30 * 86_400_000);
    expect(compiled("admin: { audit_retention: 2h }\n").auditRetentionMs).toBe(7_200_000);
    expect(problems("admin:\n  audit_retention: 10ms\n")).toEqual([
      "gw.yaml:5:20: admin.audit_retention: keep the audit log at least 1s",
    ]);
    expect(problems("admin:\n  audit_retention: 4000d\n")).toEqual([
      "gw.yaml:5:20: admin.audit_retention: keep the audit log at most 3650d (ten years)",
    ]);
  });
});
