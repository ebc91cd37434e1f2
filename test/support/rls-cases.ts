// envoyproxy/ratelimit's test configs (test/config/*.yaml and test/integration/runtime/...),
// transcribed, and its integration sequence (test/integration/integration_test.go,
// testBasicBaseConfig) as one function over any `ask`: the unit test runs it over the memory
// store, test/integration/rls.test.ts over a real Redis.
import { expect } from "vitest";
import type { RlsRequest, RlsResponse } from "../../src/rls/decide.js";

export const BASIC_CONFIG = `# test/config/basic_config.yaml
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: key2
    value: value2
    rate_limit: { unit: minute, requests_per_unit: 30 }
  - key: key2
    value: value3
  - key: key3
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: key4
    rate_limit: { name: key4_rate_limit, unit: day, requests_per_unit: 1 }
  - key: key5
    value: value5
    rate_limit: { unit: day, requests_per_unit: 15 }
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit: { unit: day, requests_per_unit: 25 }
  - key: key6
    rate_limit: { unlimited: true }
  - key: key7
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 70 }
`;

export const WILDCARD = `# test/config/wildcard.yaml
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: noWild
    value: foo
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: noVal
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: midWild
    value: bar*b
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: multiWild
    value: foo*bar*baz
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit: { unit: minute, requests_per_unit: 20 }
`;

/** test/config/share_threshold.yaml's first cases, at 10/second (base_limiter_test.go's limit). */
export const SHARE_THRESHOLD = `domain: shared
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: parent
    value: value1
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: { unit: second, requests_per_unit: 10 }
`;

export const INTEGRATION_BASIC = `# test/integration/runtime/current/ratelimit/config/basic.yaml
domain: basic
descriptors:
  - key: key1
    rate_limit: { unit: second, requests_per_unit: 50 }
  - key: one_per_minute
    rate_limit: { unit: minute, requests_per_unit: 1 }
`;

export const INTEGRATION_ANOTHER = `# test/integration/runtime/current/ratelimit/config/another.yaml
domain: another
descriptors:
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: key3
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: key4
    rate_limit: { unit: day, requests_per_unit: 20 }
`;

const one = (domain: string, key: string, value: string): RlsRequest => ({
  domain,
  descriptors: [{ entries: [{ key, value }] }],
  hits_addend: 1,
});

/**
 * testBasicBaseConfig, step by step. `wait(ms)` lets the clock run (the Go test sleeps 2 s). Its
 * minute and hour windows must not end during the sequence: the caller starts it away from
 * their edges. One difference, said where it is: a refused request takes nothing anywhere.
 */
export async function integrationSequence(
  ask: (r: RlsRequest) => Promise<RlsResponse>,
  wait: (ms: number) => Promise<void>,
  denyCache = false,
): Promise<void> {
  const unique = String(Math.floor(Math.random() * 1e12));
  expect(await ask(one("foo", "hello", "world"))).toMatchObject({
    overall_code: "OK",
    statuses: [{ code: "OK", limit_remaining: 0 }],
  });
  expect((await ask(one("basic", "key1", `foo${unique}`))).statuses[0]).toMatchObject({
    code: "OK",
    current_limit: { requests_per_unit: 50, unit: "SECOND" },
    limit_remaining: 49,
  });
  for (let i = 0; i < 25; i++) {
    const r = await ask(one("another", "key2", unique));
    const over = i >= 20;
    expect(r.overall_code, `key2 request ${i}`).toBe(over ? "OVER_LIMIT" : "OK");
    expect(r.statuses[0]).toMatchObject({
      code: over ? "OVER_LIMIT" : "OK",
      current_limit: { requests_per_unit: 20, unit: "MINUTE" },
      limit_remaining: over ? 0 : 20 - (i + 1),
    });
  }
  const second = `${unique}b`;
  for (let i = 0; i < 15; i++) {
    const r = await ask({
      domain: "another",
      descriptors: [
        { entries: [{ key: "key2", value: second }] },
        { entries: [{ key: "key3", value: second }] },
      ],
      hits_addend: 1,
    });
    const over = i >= 10;
    expect(r.overall_code, `key2+key3 request ${i}`).toBe(over ? "OVER_LIMIT" : "OK");
    // Differs from envoyproxy/ratelimit's default, matches its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
    // variant of this very test: a request refused by key3 takes nothing from key2, which stays at
    // 10. Once the deny cache knows key3 is over (a shared store's), it answers without the store
    // and says 0 for key2, whose remainder it does not know.
    expect(r.statuses[0]).toMatchObject({
      code: "OK",
      current_limit: { requests_per_unit: 20, unit: "MINUTE" },
      limit_remaining: over ? (denyCache && i > 10 ? 0 : 10) : 20 - (i + 1),
    });
    expect(r.statuses[1]).toMatchObject({
      code: over ? "OVER_LIMIT" : "OK",
      current_limit: { requests_per_unit: 10, unit: "HOUR" },
      limit_remaining: over ? 0 : 10 - (i + 1),
    });
  }
  const first = await ask(one("another", "key4", `durTest${unique}`));
  await wait(2000);
  const later = await ask(one("another", "key4", `durTest${unique}`));
  expect(later.statuses[0]!.duration_until_reset!.seconds).toBeLessThan(
    first.statuses[0]!.duration_until_reset!.seconds,
  );
}
