// upstreams.<name>.targets, health and retries: what --check says, where, and what compiles.
import { describe, expect, it } from "vitest";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";

const file = (upstream: string, route = "") => `store: { url: memory:// }
upstreams:
  api:
${upstream}
routes:
  - { name: all, match: { path: / }, upstream: api${route} }
`;

function problems(yaml: string): string[] {
  const r = loadConfigText(yaml, "gw.yaml", {});
  return r.ok ? [] : r.problems.map(formatProblem);
}

function runtime(yaml: string) {
  const r = loadConfigText(yaml, "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: r.version });
}

describe("upstream targets in the config", () => {
  it("compiles targets with weights, health and retries; a route's retries wins", () => {
    const rt = runtime(
      file(
        `    targets:
      - http://10.0.0.1:8080/api
      - { url: "http://10.0.0.2:8080/api/", weight: 3 }
    health: { path: /healthz }
    retries: 2`,
        ", retries: 0",
      ),
    );
    const api = rt.upstreams.get("api")!;
    expect(api.targets.map((t) => [t.origin, t.host, t.weight])).toEqual([
      ["http://10.0.0.1:8080", "10.0.0.1:8080", 1],
      ["http://10.0.0.2:8080", "10.0.0.2:8080", 3],
    ]);
    expect(api.basePath).toBe("/api");
    expect(api.health).toEqual({ path: "/healthz", intervalMs: 5000, timeoutMs: 1000 });
    expect(api.retries).toBe(2);
    expect(rt.routeList[0]!.retries).toBe(0);
  });

  it("the short forms keep working: one target, no health checks, no retries", () => {
    for (const form of ["    http://127.0.0.1:3000", "    url: http://127.0.0.1:3000"]) {
      const yaml = file(form).replace("  api:\n    http", "  api: http");
      const api = runtime(yaml).upstreams.get("api")!;
      expect(api.targets).toEqual([
        expect.objectContaining({ origin: "http://127.0.0.1:3000", host: "127.0.0.1:3000", weight: 1 }),
      ]);
      expect(api.health).toBeUndefined();
      expect(api.retries).toBe(0);
    }
  });

  it("keys a reload compares: a weight changes the upstream, not the target's pool", () => {
    const a = runtime(file("    targets: [http://10.0.0.1:80, http://10.0.0.2:80]")).upstreams.get("api")!;
    const b = runtime(
      file("    targets: [http://10.0.0.1:80, { url: http://10.0.0.2:80, weight: 2 }]"),
    ).upstreams.get("api")!;
    expect(a.poolKey).not.toBe(b.poolKey);
    expect(a.targets.map((t) => t.key)).toEqual(b.targets.map((t) => t.key));
  });

  it("needs exactly one of url and targets", () => {
    expect(problems(file("    timeout: 5s"))).toEqual([
      "gw.yaml:4:5: upstreams.api: an upstream needs url, or targets for several addresses",
    ]);
    expect(problems(file("    url: http://10.0.0.1:80\n    targets: [http://10.0.0.2:80]"))).toEqual([
      "gw.yaml:4:5: upstreams.api: give url or targets, not both: list the url among the targets",
    ]);
  });

  it("refuses targets that differ by more than their address, each at its position", () => {
    expect(
      problems(
        file(`    targets:
      - http://10.0.0.1:80/v1
      - https://10.0.0.2:443/v1
      - { url: http://10.0.0.3:80/v2 }
      - http://10.0.0.1:80/v1/`),
      ),
    ).toEqual([
      "gw.yaml:6:9: upstreams.api.targets[1]: every target of an upstream uses one scheme: this one is https, the first http",
      'gw.yaml:7:16: upstreams.api.targets[2].url: every target of an upstream has the same path, which requests are sent under: this one has "/v2", the first "/v1"',
      "gw.yaml:8:9: upstreams.api.targets[3]: http://10.0.0.1 is already target 0: list it once and give it a weight instead",
    ]);
  });

  it("refuses a weight that is not a positive integer, an empty list, a health check without a path", () => {
    expect(problems(file("    targets: [{ url: http://10.0.0.1:80, weight: 0 }]"))).toHaveLength(1);
    expect(problems(file("    targets: []"))[0]).toContain("list at least one target");
    expect(problems(file("    url: http://10.0.0.1:80\n    health: { interval: 5s }"))[0]).toContain(
      "upstreams.api.health",
    );
  });

  it("refuses a health check that outlasts its interval", () => {
    expect(
      problems(file("    url: http://10.0.0.1:80\n    health: { path: /healthz, interval: 1s }")),
    ).toEqual([]);
    expect(
      problems(file("    url: http://10.0.0.1:80\n    health: { path: /healthz, interval: 500ms }")),
    ).toEqual([
      "gw.yaml:5:13: upstreams.api.health: a check's timeout (1000 ms, the default) must not be longer than the interval (500 ms) between checks",
    ]);
  });
});
