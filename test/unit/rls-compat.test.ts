// envoyproxy/ratelimit's own test cases, translated: its config tests (test/config/config_test.go
// and the YAML beside it), its service tests (test/service/ratelimit_test.go, which mock the
// cache: here the real limiter over the memory store decides), its base limiter tests
// (test/limiter/base_limiter_test.go) and its Redis integration sequence
// (test/integration/integration_test.go, testBasicBaseConfig). Cases and configs only: none of
// its Go code. Each case answered differently says so, with why (docs/envoy.md has the list).
// The memory store runs the same arithmetic as the Lua (the conformance suite proves it);
// test/integration/rls.test.ts runs the integration sequence against a real Redis.
import { describe, expect, it } from "vitest";
import { compileRlsText } from "../../src/config/rls-config.js";
import { StoreTimeoutError } from "../../src/errors.js";
import { createGatewayLimiter } from "../../src/limits/gateway-limiter.js";
import { MemoryStore } from "../../src/limits/stores/memory.js";
import type { RlsSettings } from "../../src/model/rls.js";
import type { RlsRequest } from "../../src/rls/decide.js";
import { matchDescriptor } from "../../src/rls/match.js";
import { decideCall, type RlsGeneration } from "../../src/rls/server.js";
import {
  BASIC_CONFIG,
  INTEGRATION_ANOTHER,
  INTEGRATION_BASIC,
  integrationSequence,
  SHARE_THRESHOLD,
  WILDCARD,
} from "../support/rls-cases.js";

function domainsOf(...texts: string[]) {
  const domains = new Map();
  for (const text of texts) {
    const c = compileRlsText(text, "ratelimit.yaml");
    if (!c.ok) throw new Error(c.problems.map((p) => p.message).join("; "));
    domains.set(c.domain, c.root);
  }
  return domains;
}

/** A generation over a memory store at a clock the test moves. */
function world(texts: string[], opts: Partial<RlsSettings> = {}) {
  const clock = { now: Date.UTC(2026, 0, 1, 0, 0, 2) };
  const store = new MemoryStore({ now: () => clock.now });
  const settings: RlsSettings = {
    listen: "127.0.0.1:0",
    files: [],
    domains: domainsOf(...texts),
    responseHeaders: false,
    onFailure: "open",
    ...opts,
  };
  const gen: RlsGeneration = {
    runtime: { rls: settings, store: { prefix: "t:" } as never, config: { store: { local_fraction: 0.25 } } },
    limiter: createGatewayLimiter({ store, prefix: "t:", denyCache: false, now: () => clock.now }),
  };
  const ask = async (request: RlsRequest) => {
    const out = await decideCall(gen, request);
    if (!out.ok) throw Object.assign(new Error(out.message), { code: out.code });
    return out.response;
  };
  return { clock, ask, settings };
}

const d = (...pairs: [string, string][]) => ({ entries: pairs.map(([key, value]) => ({ key, value })) });

describe("config_test.go: which limit a descriptor gets (GetLimit)", () => {
  const root = domainsOf(BASIC_CONFIG).get("test-domain")!;
  const limitOf = (...pairs: [string, string][]) => {
    const m = matchDescriptor(root, d(...pairs).entries);
    if (!m) return null;
    return m.rule.unlimited
      ? "unlimited"
      : `${m.rule.requestsPerUnit}/${m.rule.unit}${m.rule.name ? ` ${m.rule.name}` : ""}`;
  };
  it.each([
    // TestBasicConfig
    [[["key1", "something"]], null],
    [[["key1", "value1"]], null],
    [
      [
        ["key2", "value2"],
        ["subkey", "subvalue"],
      ],
      null,
    ],
    [
      [
        ["key5", "value5"],
        ["subkey5", "subvalue"],
      ],
      null,
    ],
    [
      [
        ["key1", "value1"],
        ["subkey1", "something"],
      ],
      "5/second",
    ],
    [
      [
        ["key1", "value1"],
        ["subkey1", "subvalue1"],
      ],
      "10/second",
    ],
    [[["key2", "something"]], "20/minute"],
    [[["key2", "value2"]], "30/minute"],
    [[["key2", "value3"]], null],
    [[["key3", "foo"]], "1/hour"],
    [[["key4", "foo"]], "1/day key4_rate_limit"],
    [[["key6", "foo"]], "unlimited"],
    [[["key7", "unspecified_value"]], "70/minute"],
    [[["key7", "another_value"]], "70/minute"],
    [[], null],
  ] as [[string, string][], string | null][])("%j → %s", (pairs, expected) => {
    expect(limitOf(...pairs)).toBe(expected);
  });

  it("an unknown domain has no limits, a descriptor's own limit override included", async () => {
    const { ask } = world([BASIC_CONFIG]);
    const r = await ask({
      domain: "foo_domain",
      descriptors: [{ ...d(["key1", "value1"]), limit: { requests_per_unit: 10, unit: "DAY" } }],
    });
    expect(r.statuses[0]).toEqual({ code: "OK", limit_remaining: 0 });
  });

  it("TestConfigLimitOverride: the descriptor's limit replaces the file's, each value its own counter", async () => {
    const { ask } = world([BASIC_CONFIG]);
    const over = (value: string, n: number, unit: string) => ({
      domain: "test-domain",
      descriptors: [{ ...d(["key1", "value1"], ["subkey1", value]), limit: { requests_per_unit: n, unit } }],
    });
    expect((await ask(over("something", 10, "DAY"))).statuses[0]).toMatchObject({
      code: "OK",
      current_limit: { requests_per_unit: 10, unit: "DAY" },
      limit_remaining: 9,
    });
    expect((await ask(over("something", 42, "HOUR"))).statuses[0]).toMatchObject({
      current_limit: { requests_per_unit: 42, unit: "HOUR" },
      limit_remaining: 41,
    });
    expect((await ask(over("something_else", 42, "HOUR"))).statuses[0]!.limit_remaining).toBe(41);
  });

  it("TestShadowModeConfig: shadow_mode is per limit", () => {
    const shadow = `domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
        shadow_mode: true
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
    shadow_mode: true
  - key: key2
    value: value2
    rate_limit: { unit: minute, requests_per_unit: 30 }
`;
    const r = domainsOf(shadow).get("test-domain")!;
    const shadowOf = (...pairs: [string, string][]) => matchDescriptor(r, d(...pairs).entries)?.rule.shadow;
    expect(shadowOf(["key1", "value1"], ["subkey1", "something"])).toBe(false);
    expect(shadowOf(["key1", "value1"], ["subkey1", "subvalue1"])).toBe(true);
    expect(shadowOf(["key2", "something"])).toBe(true);
    expect(shadowOf(["key2", "value2"])).toBe(false);
  });

  it("TestWildcardConfig: trailing, middle and several wildcards; * matches the empty string", () => {
    const r = domainsOf(WILDCARD).get("test-domain")!;
    const keyOf = (...pairs: [string, string][]) =>
      matchDescriptor(r, d(...pairs).entries)?.rule.fullKey ?? null;
    expect(keyOf(["noVal", "foo1"])).toBe(keyOf(["noVal", "foo2"]));
    expect(keyOf(["wild", "foo1"])).toBe("test-domain.wild_foo*");
    expect(keyOf(["wild", "foo2"])).toBe("test-domain.wild_foo*");
    expect(keyOf(["nestedWild", "val1"], ["wild", "goo2"])).toBe("test-domain.nestedWild_val1.wild_goo*");
    expect(keyOf(["wild", "bar"])).toBeNull();
    expect(keyOf(["noWild", "foo1"])).toBeNull();
    expect(keyOf(["midWild", "barab"])).toBe("test-domain.midWild_bar*b");
    expect(keyOf(["midWild", "bar123b"])).toBe("test-domain.midWild_bar*b");
    expect(keyOf(["midWild", "barb"])).toBe("test-domain.midWild_bar*b");
    expect(keyOf(["midWild", "bara"])).toBeNull();
    expect(keyOf(["midWild", "xbarb"])).toBeNull();
    expect(keyOf(["multiWild", "foo123bar456baz"])).toBe("test-domain.multiWild_foo*bar*baz");
    expect(keyOf(["multiWild", "foobarbaz"])).toBe("test-domain.multiWild_foo*bar*baz");
    expect(keyOf(["multiWild", "foo123baz"])).toBeNull();
    expect(keyOf(["multiWild", "bar456baz"])).toBeNull();
  });

  it("a wildcard without share_threshold counts each value apart; with it, all values share one counter", async () => {
    const { ask } = world([WILDCARD, SHARE_THRESHOLD]);
    // wild foo*: 20/minute per value.
    for (let i = 0; i < 20; i++) await ask({ domain: "test-domain", descriptors: [d(["wild", "foo1"])] });
    expect((await ask({ domain: "test-domain", descriptors: [d(["wild", "foo1"])] })).overall_code).toBe(
      "OVER_LIMIT",
    );
    expect((await ask({ domain: "test-domain", descriptors: [d(["wild", "foo2"])] })).overall_code).toBe(
      "OK",
    );
    // TestGenerateCacheKeysWithShareThreshold: files/* shared by every value it matches (10/second here).
    for (let i = 0; i < 5; i++) await ask({ domain: "shared", descriptors: [d(["files", "files/a.txt"])] });
    for (let i = 0; i < 5; i++) await ask({ domain: "shared", descriptors: [d(["files", "files/b.txt"])] });
    expect((await ask({ domain: "shared", descriptors: [d(["files", "files/c.txt"])] })).overall_code).toBe(
      "OVER_LIMIT",
    );
    // Nested: parent's value is its own, the shared entry's pattern stands for any value.
    const nested = (v: string) => ({
      domain: "shared",
      descriptors: [d(["parent", "value1"], ["files", v])],
    });
    expect((await ask(nested("nested/x"))).statuses[0]!.limit_remaining).toBe(9);
    expect((await ask(nested("nested/y"))).statuses[0]!.limit_remaining).toBe(8);
  });
});

describe("config_test.go and test/config/*.yaml: refused files, with their position", () => {
  const problemsOf = (text: string) => {
    const c = compileRlsText(text, "rls.yaml");
    return c.ok
      ? []
      : c.problems.map((p) => `${p.line}:${p.column}: ${p.path ? `${p.path}: ` : ""}${p.message}`);
  };
  it.each([
    // empty_domain.yaml
    [
      'domain: ""\ndescriptors: []\n',
      "1:9: domain: config file cannot have empty domain: give domain the name Envoy's requests carry (its rate limit filter's domain)",
    ],
    // empty_key.yaml
    [
      "domain: test-domain\ndescriptors:\n  - value: value1\n",
      "3:5: descriptors[0]: descriptor has empty key: give it the key Envoy's descriptor entry sends",
    ],
    // duplicate_key.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n\n  - key: key1\n    value: value1\n",
      "6:5: descriptors[1]: duplicate descriptor composite key 'test-domain.key1_value1': merge the two entries",
    ],
    // bad_limit_unit.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    rate_limit:\n      unit: foo\n      requests_per_unit: 5\n",
      "5:13: descriptors[0].rate_limit.unit: invalid rate limit unit 'foo': expected one of second, minute, hour, day, week, month, year",
    ],
    // replaces_self.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    rate_limit:\n      name: self\n      replaces:\n        - name: self\n      unit: second\n      requests_per_unit: 5\n",
      "7:11: descriptors[0].rate_limit.replaces[0]: replaces should not contain name of same descriptor",
    ],
    // replaces_empty.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    rate_limit:\n      name: self\n      replaces:\n        - name:\n      unit: second\n      requests_per_unit: 5\n",
      "7:11: descriptors[0].rate_limit.replaces[0]: should not have an empty replaces entry: give the name of the limit it replaces",
    ],
    // misspelled_key.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n    ratelimit:\n      unit: day\n      requests_per_unit: 5\n",
      "5:5: descriptors[0]: unknown key 'ratelimit' (did you mean rate_limit?); expected one of key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold",
    ],
    // misspelled_key2.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: key1\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n",
      "6:7: descriptors[0].rate_limit: unknown key 'requestsperunit' (did you mean requests_per_unit?); expected one of unit, requests_per_unit, unlimited, name, replaces",
    ],
    // non_string_key.yaml
    [
      "0.25: test-domain\ndescriptors:\n  - key: key1\n    rate_limit: { unit: day, requests_per_unit: 5 }\n",
      "1:1: unknown key '0.25'; expected one of domain, descriptors",
    ],
    // non_map_list.yaml
    [
      "domain: test-domain\ndescriptors:\n  - a\n  - b\n",
      "3:5: descriptors[0]: each entry of descriptors is a mapping with a key (and maybe value, rate_limit, descriptors)",
    ],
    // unlimited_with_unit.yaml
    [
      "domain: test-domain\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: day\n      requests_per_unit: 25\n",
      "6:13: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited: remove unit (or unlimited)",
    ],
    // share_threshold on a value without *
    [
      "domain: d\ndescriptors:\n  - key: files\n    value: plain\n    share_threshold: true\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n",
      "5:22: descriptors[0].share_threshold: share_threshold can only be used with wildcard values (containing '*'), but found key 'files_plain'",
    ],
    // Not in envoyproxy/ratelimit: what tollgate refuses where it would count silently.
    [
      "domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n",
      "4:5: descriptors[0]: quota_mode is not supported by tollgate's rate-limit service; remove it (docs/envoy.md)",
    ],
    [
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute }\n",
      "4:17: descriptors[0].rate_limit: requests_per_unit is missing: how many requests each unit allows (0 refuses every one)",
    ],
    [
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: -1 }\n",
      "4:52: descriptors[0].rate_limit.requests_per_unit: requests_per_unit is a whole number from 0 to 4294967295",
    ],
  ])("%j", (text, expected) => {
    // One pass reports every problem: a misspelt requests_per_unit is also a missing one.
    expect(problemsOf(text)).toContain(expected);
  });

  it("bad_yaml.yaml: a syntax error names its position", () => {
    expect(problemsOf("'''\n")).toEqual(["2:1: Missing closing 'quote"]);
  });
});

describe("ratelimit_test.go: the service's answer", () => {
  const CONFIG = `domain: different-domain
descriptors:
  - key: foo
    rate_limit: { unit: minute, requests_per_unit: 10, name: key_name }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: baz
    rate_limit: { unlimited: true }
  - key: narrow
    rate_limit: { unit: minute, requests_per_unit: 1, name: narrow }
  - key: wide
    rate_limit: { unit: minute, requests_per_unit: 100, replaces: [{ name: narrow }] }
`;
  const spend = async (ask: ReturnType<typeof world>["ask"], key: string, n: number) => {
    for (let i = 0; i < n; i++) await ask({ domain: "different-domain", descriptors: [d([key, "bar"])] });
  };

  it("TestService: a descriptor without a limit is OK with nothing; one over its limit makes the whole request OVER_LIMIT, in either order", async () => {
    const { ask } = world([CONFIG]);
    expect(await ask({ domain: "test-domain", descriptors: [d(["hello", "world"])] })).toEqual({
      overall_code: "OK",
      statuses: [{ code: "OK", limit_remaining: 0 }],
      response_headers_to_add: [],
    });
    await spend(ask, "foo", 10);
    const r = await ask({
      domain: "different-domain",
      descriptors: [d(["foo", "bar"]), d(["hello", "world"])],
    });
    expect(r.overall_code).toBe("OVER_LIMIT");
    expect(r.statuses).toMatchObject([
      {
        code: "OVER_LIMIT",
        current_limit: { requests_per_unit: 10, unit: "MINUTE", name: "key_name" },
        limit_remaining: 0,
      },
      { code: "OK", limit_remaining: 0 },
    ]);
    const swapped = await ask({
      domain: "different-domain",
      descriptors: [d(["hello", "world"]), d(["foo", "bar"])],
    });
    expect(swapped.statuses.map((s) => s.code)).toEqual(["OK", "OVER_LIMIT"]);
  });

  it("TestRuleShadowMode / TestMixedRuleShadowMode: a shadow limit over its limit answers OK; another limit still refuses", async () => {
    const { ask } = world([CONFIG]);
    await spend(ask, "shadow", 10);
    const shadowOnly = await ask({
      domain: "different-domain",
      descriptors: [d(["shadow", "bar"]), d(["hello", "world"])],
    });
    expect(shadowOnly.overall_code).toBe("OK");
    expect(shadowOnly.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: { requests_per_unit: 10 },
      limit_remaining: 0,
    });
    await spend(ask, "foo", 10);
    const mixed = await ask({
      domain: "different-domain",
      descriptors: [d(["shadow", "bar"]), d(["foo", "bar"])],
    });
    expect(mixed.overall_code).toBe("OVER_LIMIT");
    expect(mixed.statuses.map((s) => s.code)).toEqual(["OK", "OVER_LIMIT"]);
  });

  it("TestServiceWithDefaultRatelimitHeaders: the headers describe the descriptor over its limit, reset in seconds", async () => {
    const { ask } = world([CONFIG], { responseHeaders: true });
    await spend(ask, "foo", 10);
    const r = await ask({
      domain: "different-domain",
      descriptors: [d(["foo", "bar"]), d(["hello", "world"])],
    });
    // The clock is 2 s into its minute: 58 s to the reset, as the Go test's fake clock.
    expect(r.response_headers_to_add).toEqual([
      { key: "RateLimit-Limit", value: "10" },
      { key: "RateLimit-Remaining", value: "0" },
      { key: "RateLimit-Reset", value: "58" },
    ]);
    // None over: the descriptor closest to its limit.
    const fresh = await ask({
      domain: "different-domain",
      descriptors: [d(["wide", "x"]), d(["shadow", "y"])],
    });
    expect(fresh.response_headers_to_add).toEqual([
      { key: "RateLimit-Limit", value: "10" },
      { key: "RateLimit-Remaining", value: "9" },
      { key: "RateLimit-Reset", value: "58" },
    ]);
    // Without a limit anywhere, no headers.
    expect(
      (await ask({ domain: "different-domain", descriptors: [d(["hello", "world"])] }))
        .response_headers_to_add,
    ).toEqual([]);
  });

  it("TestEmptyDomain / TestEmptyDescriptors: refused with their messages (INVALID_ARGUMENT)", async () => {
    const { ask } = world([CONFIG]);
    await expect(ask({ domain: "", descriptors: [d(["a", "b"])] })).rejects.toMatchObject({
      message: "rate limit domain must not be empty",
      code: 3,
    });
    await expect(ask({ domain: "different-domain", descriptors: [] })).rejects.toMatchObject({
      message: "rate limit descriptor list must not be empty",
      code: 3,
    });
  });

  it("TestUnlimited: a limited, an unknown and an unlimited descriptor", async () => {
    const { ask } = world([CONFIG]);
    const r = await ask({
      domain: "different-domain",
      descriptors: [d(["foo", "bar"]), d(["hello", "world"]), d(["baz", "qux"])],
    });
    expect(r.overall_code).toBe("OK");
    expect(r.statuses).toMatchObject([
      { code: "OK", current_limit: { requests_per_unit: 10, unit: "MINUTE" }, limit_remaining: 9 },
      { code: "OK", limit_remaining: 0 },
      { code: "OK", limit_remaining: 4_294_967_295 },
    ]);
    expect(r.statuses[1]!.current_limit).toBeUndefined();
    expect(r.statuses[2]!.current_limit).toBeUndefined();
  });

  it("replaces (constructLimitsToCheck): a limit another matched limit replaces is not checked", async () => {
    const { ask } = world([CONFIG]);
    await spend(ask, "narrow", 1);
    const alone = await ask({ domain: "different-domain", descriptors: [d(["narrow", "bar"])] });
    expect(alone.overall_code).toBe("OVER_LIMIT");
    const replaced = await ask({
      domain: "different-domain",
      descriptors: [d(["narrow", "bar"]), d(["wide", "bar"])],
    });
    expect(replaced.overall_code).toBe("OK");
    expect(replaced.statuses[0]).toEqual({ code: "OK", limit_remaining: 0 });
    expect(replaced.statuses[1]).toMatchObject({ code: "OK", limit_remaining: 99 });
  });
});

describe("GetHitsAddends and base_limiter_test.go: the cost", () => {
  const CONFIG =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 5 }\n";
  it("the request's hits_addend is each descriptor's cost; 0 (unset) counts 1", async () => {
    const { ask } = world([CONFIG]);
    expect(
      (await ask({ domain: "d", descriptors: [d(["k", "a"])], hits_addend: 0 })).statuses[0]!.limit_remaining,
    ).toBe(4);
    expect(
      (await ask({ domain: "d", descriptors: [d(["k", "a"])], hits_addend: 3 })).statuses[0]!.limit_remaining,
    ).toBe(1);
    // TestGetResponseStatusOverLimit: over its limit, 0 remaining whatever is left.
    expect(
      (await ask({ domain: "d", descriptors: [d(["k", "a"])], hits_addend: 2 })).statuses[0],
    ).toMatchObject({
      code: "OVER_LIMIT",
      limit_remaining: 0,
    });
  });
  it("a descriptor's own hits_addend wins over the request's, and its 0 looks without taking", async () => {
    const { ask } = world([CONFIG]);
    const own = (n: number) => ({
      domain: "d",
      descriptors: [{ ...d(["k", "b"]), hits_addend: { value: n } }],
      hits_addend: 3,
    });
    expect((await ask(own(4))).statuses[0]!.limit_remaining).toBe(1);
    expect((await ask(own(0))).statuses[0]).toMatchObject({ code: "OK", limit_remaining: 1 });
    expect((await ask(own(0))).statuses[0]!.limit_remaining).toBe(1);
    expect((await ask(own(1))).statuses[0]!.limit_remaining).toBe(0);
    // Differs: envoyproxy/ratelimit answers OK here (its count equals the limit, not above it);
    // tollgate's 0 asks whether one more request would fit.
    expect((await ask(own(0))).overall_code).toBe("OVER_LIMIT");
  });
  it("a uint64 cost far past the limit is refused like any cost past it", async () => {
    const { ask } = world([CONFIG]);
    expect(
      (await ask({ domain: "d", descriptors: [{ ...d(["k", "c"]), hits_addend: { value: 2 ** 60 } }] }))
        .overall_code,
    ).toBe("OVER_LIMIT");
    expect((await ask({ domain: "d", descriptors: [d(["k", "c"])] })).statuses[0]!.limit_remaining).toBe(4);
  });
});

describe("integration_test.go testBasicBaseConfig, over the memory store", () => {
  it("answers the sequence step by step", async () => {
    const { ask, clock } = world([INTEGRATION_BASIC, INTEGRATION_ANOTHER]);
    await integrationSequence(ask, (ms) => {
      clock.now += ms;
      return Promise.resolve();
    });
  });
});

describe("a store that cannot answer: rls.on_failure", () => {
  const CONFIG =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 8 }\n  - key: free\n";
  // Stands in for a Redis that times out (the e2e test stops a real one): every check rejects.
  const dead = Object.assign(new MemoryStore(), {
    check: () => Promise.reject(new StoreTimeoutError(100)),
  });
  const call = async (onFailure: RlsSettings["onFailure"]) => {
    const local = new MemoryStore({ now: () => Date.UTC(2026, 0, 1, 0, 0, 2) });
    const gen: RlsGeneration = {
      runtime: {
        rls: { listen: "", files: [], domains: domainsOf(CONFIG), responseHeaders: true, onFailure },
        store: { prefix: "t:" } as never,
        config: { store: { local_fraction: 0.25 } },
      },
      limiter: createGatewayLimiter({ store: dead, prefix: "t:", denyCache: false, local }),
    };
    const request = { domain: "d", descriptors: [d(["k", "a"]), d(["free", "x"])] };
    const answers = [];
    for (let i = 0; i < 3; i++) {
      const out = await decideCall(gen, request);
      if (!out.ok) throw new Error(out.message);
      answers.push(out);
    }
    return answers;
  };

  it("open: every descriptor OK", async () => {
    const [first] = await call("open");
    expect(first!.decidedBy).toBe("degraded_open");
    expect(first!.response.overall_code).toBe("OK");
    expect(first!.response.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: { requests_per_unit: 8 },
      limit_remaining: 0,
    });
  });

  it("closed: every limited descriptor OVER_LIMIT, the others OK", async () => {
    const [first] = await call("closed");
    expect(first!.decidedBy).toBe("degraded_closed");
    expect(first!.response.overall_code).toBe("OVER_LIMIT");
    expect(first!.response.statuses.map((s) => s.code)).toEqual(["OVER_LIMIT", "OK"]);
  });

  it("local: this instance's share of the limit (local_fraction 0.25 of 8: 2), decided in-process", async () => {
    const answers = await call("local");
    expect(answers.map((a) => a.decidedBy)).toEqual(["degraded_local", "degraded_local", "degraded_local"]);
    expect(answers.map((a) => a.response.overall_code)).toEqual(["OK", "OK", "OVER_LIMIT"]);
  });
});
