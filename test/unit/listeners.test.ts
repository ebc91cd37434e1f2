// The listeners' addresses (src/gateway/listeners.ts): how a `listen` setting splits into the host
// and port Node binds, how a bound address is written on the start line, and what the start line
// says about the store and upstreams (never their credentials). No socket is opened.
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { PROXY_SERVER_OPTIONS, splitHostPort, targetsOf, urlOf } from "../../src/gateway/listeners.js";
import { runtimeOf } from "../../src/gateway/reload-decision.js";

describe("splitHostPort", () => {
  it.each([
    ["127.0.0.1:8080", "127.0.0.1", 8080],
    ["0.0.0.0:0", "0.0.0.0", 0],
    [":8080", "0.0.0.0", 8080],
    ["[::1]:9000", "::1", 9000],
    ["[::]:80", "::", 80],
    ["gateway.internal:443", "gateway.internal", 443],
  ])("%s binds host %s, port %i", (listen, host, port) => {
    expect(splitHostPort(listen)).toEqual({ host, port });
  });
});

describe("urlOf", () => {
  it("brackets an IPv6 address", () => {
    expect(urlOf({ address: "127.0.0.1", family: "IPv4", port: 8080 })).toBe("http://127.0.0.1:8080");
    expect(urlOf({ address: "::1", family: "IPv6", port: 9000 })).toBe("http://[::1]:9000");
  });
});

describe("targetsOf", () => {
  it("names the store's address and each upstream without their user and password", () => {
    const loaded = loadConfigText(
      `listen: 127.0.0.1:0
store: { url: "redis://app:hunter2@redis.internal:6380/2" }
upstreams:
  api: http://svc:s3cret@api.internal:3000/v1
  web: http://web.internal
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
      "gw.yaml",
      {},
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const targets = targetsOf(runtimeOf(loaded));
    expect(targets.store_address).toBe("redis.internal:6380");
    expect(targets.upstreams.web).toBe("http://web.internal");
    expect(targets.upstreams.api).toBe("http://api.internal:3000/v1");
    expect(JSON.stringify(targets)).not.toMatch(/hunter2|s3cret/);
  });
});

describe("PROXY_SERVER_OPTIONS", () => {
  it("checks the slow-client timeouts every second, not every 30 s", () => {
    expect(PROXY_SERVER_OPTIONS.connectionsCheckingInterval).toBe(1000);
    expect(PROXY_SERVER_OPTIONS.headersTimeout).toBeLessThan(PROXY_SERVER_OPTIONS.requestTimeout);
    // The pipeline answers a missing Host with its own problem+json.
    expect(PROXY_SERVER_OPTIONS.requireHostHeader).toBe(false);
  });
});
