// The `rls` key of tollgate's config: one case per failure mode, with the exact position and
// message, in the gateway's file and in the envoyproxy/ratelimit file it names; the compiled
// runtime; restart-only and reloadable parts.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { splitRestartOnly } from "../../src/config/restart.js";
import { runtimeOf } from "../../src/gateway/reload-decision.js";

const dir = mkdtempSync(join(tmpdir(), "tollgate-rls-config-"));
const gw = join(dir, "gw.yaml");
writeFileSync(
  join(dir, "edge.yaml"),
  "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n",
);
writeFileSync(join(dir, "edge-again.yaml"), "domain: edge\ndescriptors: []\n");
writeFileSync(
  join(dir, "bad.yaml"),
  "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: { unit: minute, request_per_unit: 1 }\n",
);

const BASE = `listen: 127.0.0.1:8080
store: { url: memory://, on_failure: closed }
upstreams: { api: http://127.0.0.1:3000 }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

const load = (rls: string) => loadConfigText(`${BASE}${rls}`, gw, {});
const problems = (rls: string) => {
  const r = load(rls);
  return r.ok ? [] : r.problems.map(formatProblem);
};

describe("config: rls", () => {
  it("compiles the files it names, relative to the config, with the store's on_failure by default", () => {
    const r = load("rls: { listen: 127.0.0.1:8081, config: edge.yaml }\n");
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const rt = runtimeOf(r);
    expect(rt.rls).toMatchObject({
      listen: "127.0.0.1:8081",
      files: [join(dir, "edge.yaml")],
      responseHeaders: false,
      onFailure: "closed",
    });
    expect([...rt.rls!.domains.keys()]).toEqual(["edge"]);
  });

  it("is off when absent", () => {
    const r = load("");
    expect(r.ok && runtimeOf(r).rls).toBeUndefined();
  });

  it.each([
    [
      "rls: { listen: 127.0.0.1:8081 }\n",
      "gw.yaml:6:6: rls.config: expected the envoyproxy/ratelimit YAML file (or a list of them), relative to this file",
    ],
    [
      "rls: { listen: 8081, config: edge.yaml }\n",
      "gw.yaml:6:16: rls.listen: expected host:port such as 127.0.0.1:8080",
    ],
    [
      "rls: { listen: 127.0.0.1:8081, config: edge.yaml, headers: true }\n",
      'gw.yaml:6:51: rls: unknown key "headers"; expected one of: listen, config, response_headers, on_failure',
    ],
    [
      "rls: { listen: 127.0.0.1:8081, config: edge.yaml, on_failure: shut }\n",
      'gw.yaml:6:63: rls.on_failure: Invalid option: expected one of "open"|"closed"|"local"',
    ],
  ])("%j", (rls, expected) => {
    expect(problems(rls).map((p) => p.replace(`${dir}/`, ""))).toEqual([expected]);
  });

  it("a file that cannot be read names itself", () => {
    expect(problems("rls: { listen: 127.0.0.1:8081, config: missing.yaml }\n")).toEqual([
      `${join(dir, "missing.yaml")}:1:1: cannot read the rls config: no such file`,
    ]);
  });

  it("a problem in the ratelimit file is at its position in that file", () => {
    expect(problems("rls: { listen: 127.0.0.1:8081, config: bad.yaml }\n")).toEqual([
      `${join(dir, "bad.yaml")}:4:33: descriptors[0].rate_limit: unknown key 'request_per_unit' (did you mean requests_per_unit?); expected one of unit, requests_per_unit, unlimited, name, replaces`,
      `${join(dir, "bad.yaml")}:4:17: descriptors[0].rate_limit: requests_per_unit is missing: how many requests each unit allows (0 refuses every one)`,
    ]);
  });

  it("a domain in two files is refused at the second", () => {
    expect(problems("rls: { listen: 127.0.0.1:8081, config: [edge.yaml, edge-again.yaml] }\n")).toEqual([
      `${join(dir, "edge-again.yaml")}:1:9: domain: duplicate domain 'edge': ${join(dir, "edge.yaml")} has it already; keep each domain in one file`,
    ]);
  });

  it("the files are part of the config's version: editing one is a change a reload applies", () => {
    const before = load("rls: { listen: 127.0.0.1:8081, config: edge.yaml }\n");
    writeFileSync(join(dir, "edge.yaml"), "domain: edge\ndescriptors: []\n");
    const after = load("rls: { listen: 127.0.0.1:8081, config: edge.yaml }\n");
    expect(before.ok && after.ok && before.version !== after.version).toBe(true);
  });

  it("rls.listen is restart-only; the rest applies live", () => {
    const a = load("rls: { listen: 127.0.0.1:8081, config: edge.yaml }\n");
    const b = load("rls: { listen: 127.0.0.1:9999, config: edge.yaml, response_headers: true }\n");
    if (!a.ok || !b.ok) throw new Error("expected both to load");
    const split = splitRestartOnly(a.config, b.config);
    expect(split.restartRequired).toEqual(["rls.listen"]);
    expect(split.config.rls).toMatchObject({ listen: "127.0.0.1:8081", response_headers: true });
    const off = load("");
    if (!off.ok) throw new Error("expected it to load");
    expect(splitRestartOnly(a.config, off.config)).toMatchObject({
      restartRequired: ["rls.listen"],
      config: { rls: a.config.rls },
    });
  });
});
