import { describe, expect, it } from "vitest";
import type { CompiledPlan } from "../../src/config/compile.js";
import type { Caller } from "../../src/identity/caller.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import { scopeBy } from "../../src/limits/key-by.js";
import { limitChecks } from "../../src/limits/limiter.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import {
  binds,
  callerLabel,
  denialLogKey,
  keyPart,
  lastHourTopKeys,
  libraryLimitKey,
  limitKey,
  scopeKey,
  topDenialsKey,
} from "../../src/limits/state-keys.js";

const plan = { name: "free", limitsByRoute: new Map(), limits: [] } as CompiledPlan;
const tenantClient: Caller = { kind: "client", id: "acme-prod", plan, tenant: "acme", ipKey: "192.0.2.1" };
const soloClient: Caller = { kind: "client", id: "dev", plan, tenant: undefined, ipKey: "192.0.2.1" };
const anonymous: Caller = { kind: "anonymous", plan, ipKey: "2001:db8::/64" };
const spec = (name: string): LimitSpec => ({ algorithm: "token_bucket", name, burst: 1, intervalMs: 1 });

describe("Redis keys", () => {
  it("hash-tag one caller's limits together", () => {
    expect(scopeKey("caller", tenantClient)).toBe("{t:acme}:c:acme-prod:");
    expect(scopeKey("tenant", tenantClient)).toBe("{t:acme}:");
    expect(scopeKey("caller", soloClient)).toBe("{c:dev}:");
    expect(scopeKey("tenant", soloClient)).toBe("{c:dev}:"); // by: tenant without a tenant: the caller
    expect(scopeKey("ip", tenantClient)).toBe("{ip:192.0.2.1}:");
    expect(scopeKey("caller", anonymous)).toBe("{ip:2001:db8::/64}:");
  });

  it("escapes ids that could break the hash tag", () => {
    expect(keyPart("a}b{c")).toBe("a%7db%7bc");
    expect(keyPart("x:y")).toBe("x%3ay");
    expect(keyPart("plain-id_1.2")).toBe("plain-id_1.2");
  });

  it("skips a plan's tenant limit for callers without a tenant", () => {
    const planned = [
      { ...compiledLimit(spec("free.global"), 0.25), by: scopeBy("caller"), tenantOnly: false },
      { ...compiledLimit(spec("free.tenant"), 0.25), by: scopeBy("tenant"), tenantOnly: true },
    ];
    expect(
      limitChecks("tg:", planned, tenantClient, { name: "search", cost: 2 }).map((c) => [c.key, c.cost]),
    ).toEqual([
      ["tg:{t:acme}:c:acme-prod:free.global", 2],
      ["tg:{t:acme}:free.tenant", 2],
    ]);
    expect(limitChecks("tg:", planned, soloClient, { name: "search", cost: 1 }).map((c) => c.key)).toEqual([
      "tg:{c:dev}:free.global",
    ]);
  });

  it("one layout for limits, the library, denial logs and the top list", () => {
    expect(limitKey("tg:", "caller", tenantClient, "free.search")).toBe(
      "tg:{t:acme}:c:acme-prod:free.search",
    );
    expect(limitKey("tg:", "ip", soloClient, "free.search")).toBe("tg:{ip:192.0.2.1}:free.search");
    expect(libraryLimitKey("tollgate:", "user:{42}", "api")).toBe("tollgate:{user%3a%7b42%7d}:api");
    expect(denialLogKey("tg:", tenantClient)).toBe("tg:{t:acme}:c:acme-prod:denials");
    expect(denialLogKey("tg:", anonymous)).toBe("tg:{ip:2001:db8::/64}:denials");
    expect(callerLabel(tenantClient)).toBe("client:acme-prod");
    expect(callerLabel(anonymous)).toBe("ip:2001:db8::/64");
    expect(topDenialsKey("tg:", 1_700_000_123_456)).toBe("tg:{denials}:top:1700000100000");
    const hour = lastHourTopKeys("tg:", 1_700_000_123_456);
    expect(hour).toHaveLength(12);
    expect(hour[0]).toBe("tg:{denials}:top:1700000100000");
    expect(hour[11]).toBe(`tg:{denials}:top:${1_700_000_100_000 - 11 * 300_000}`);
  });

  it("a plan's tenant limit binds only callers with a tenant", () => {
    const tenantLimit = {
      ...compiledLimit(spec("free.tenant"), 0.25),
      by: scopeBy("tenant"),
      tenantOnly: true,
    };
    const byTenant = {
      ...compiledLimit(spec("free.route"), 0.25),
      by: scopeBy("tenant"),
      tenantOnly: false,
    };
    expect(binds(tenantLimit, tenantClient)).toBe(true);
    expect(binds(tenantLimit, soloClient)).toBe(false);
    expect(binds(tenantLimit, anonymous)).toBe(false);
    expect(binds(byTenant, soloClient)).toBe(true);
  });
});
