// What a reload does with the file it loaded (src/gateway/reload-decision.ts): refuse it, keep the
// running runtime, or swap in a new one with the restart-only settings held at their running
// values. Decided from loaded text alone: no file, no store, no clock.
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { decideReload, runtimeOf } from "../../src/gateway/reload-decision.js";

const yaml = ({
  listen = "127.0.0.1:8080",
  prefix = "tg",
  rate = "5/s",
  upstream = "http://127.0.0.1:3000",
} = {}) =>
  `listen: ${listen}
admin: { listen: 127.0.0.1:9090 }
store: { url: "memory://", prefix: ${prefix} }
upstreams: { api: ${upstream} }
plans:
  anonymous: { global: { rate: ${rate}, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

function load(text: string) {
  return loadConfigText(text, "/etc/tollgate/gateway.yaml", {});
}

function running(text = yaml()) {
  const loaded = load(text);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return runtimeOf(loaded);
}

describe("decideReload", () => {
  it("refuses a file with errors, with its problems and warnings, and builds nothing", () => {
    const decision = decideReload(running(), load(`${yaml()}bogus: 1\n`));
    expect(decision.action).toBe("refuse");
    if (decision.action !== "refuse") return;
    expect(decision.result.ok).toBe(false);
    expect(decision.result.problems.map((p) => p.message).join("\n")).toContain("bogus");
    expect(decision).not.toHaveProperty("runtime");
  });

  it("keeps the running runtime when the version is the same", () => {
    const current = running();
    const decision = decideReload(current, load(yaml()));
    expect(decision).toEqual({
      action: "keep",
      result: { ok: true, version: current.version, changed: false, restartRequired: [] },
    });
  });

  it("swaps in the new file's runtime when only live settings changed", () => {
    const current = running();
    const decision = decideReload(current, load(yaml({ rate: "10/s", upstream: "http://127.0.0.1:3001" })));
    expect(decision.action).toBe("swap");
    if (decision.action !== "swap") return;
    expect(decision.result).toEqual({
      ok: true,
      version: decision.runtime.version,
      changed: true,
      restartRequired: [],
    });
    expect(decision.runtime.version).not.toBe(current.version);
    expect(decision.runtime.file).toBe("/etc/tollgate/gateway.yaml");
    expect(decision.runtime.config.plans.anonymous?.global?.rate).toEqual({ count: 10, periodMs: 1000 });
    expect(decision.runtime.upstreams.get("api")?.origin).toBe("http://127.0.0.1:3001");
  });

  it("holds restart-only settings at their running values and names them", () => {
    const current = running();
    const decision = decideReload(
      current,
      load(yaml({ listen: "127.0.0.1:8081", prefix: "other", rate: "9/s" })),
    );
    expect(decision.action).toBe("swap");
    if (decision.action !== "swap") return;
    expect(decision.result.restartRequired).toEqual(["listen", "store.prefix"]);
    expect(decision.runtime.config.listen).toBe("127.0.0.1:8080");
    expect(decision.runtime.store.prefix).toBe(current.store.prefix);
    // The rest of the file applies.
    expect(decision.runtime.config.plans.anonymous?.global?.rate).toEqual({ count: 9, periodMs: 1000 });
  });

  it("passes the new file's warnings on, so the reload logs them", () => {
    const withWarning = yaml().replace("anonymous:", "anonymus:");
    const loaded = load(withWarning);
    expect(loaded.ok && loaded.warnings.length).toBeGreaterThan(0);
    const decision = decideReload(running(), loaded);
    expect(decision.action).toBe("swap");
    if (decision.action !== "swap") return;
    expect(decision.warnings).toEqual(loaded.warnings);
  });
});
