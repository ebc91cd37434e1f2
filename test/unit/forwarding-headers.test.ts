// What reaches the upstream of the headers a client sends: nothing that makes the upstream serve
// another path than the one the gateway matched, and no X-Forwarded-* the gateway did not set
// unless a trusted proxy sent it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ForwardingContext, upstreamRequestHeaders } from "../../src/proxy/headers.js";

const ctx = (peerTrusted: boolean): ForwardingContext => ({
  upstreamHost: "api.internal",
  peer: "192.0.2.1",
  peerTrusted,
  forwardedFor: undefined,
  identity: { client: "alice", tenant: undefined, plan: "pro" },
  requestId: "r1",
  keyHeader: "x-api-key",
});

/** The client's raw headers, as Node gives them: name, value, name, value… */
function forwarded(raw: string[], peerTrusted: boolean): [string, string][] {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) headers[raw[i]!.toLowerCase()] = raw[i + 1]!;
  const out = upstreamRequestHeaders(raw, headers, ctx(peerTrusted));
  return out.flatMap((v, i): [string, string][] => (i % 2 ? [] : [[v.toLowerCase(), out[i + 1]!]]));
}

const GATEWAY_SETS = ["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"];

describe("headers toward the upstream", () => {
  it("never carry X-Original-URL or X-Rewrite-URL, in any spelling, from anyone", () => {
    const raw = [
      "Host",
      "gw",
      "X-Original-URL",
      "/admin",
      "x-rewrite-url",
      "/admin",
      "X_Original_URL",
      "/admin",
      "X-Custom",
      "kept",
    ];
    for (const trusted of [false, true]) {
      const names = forwarded(raw, trusted).map(([n]) => n);
      expect(names).not.toContain("x-original-url");
      expect(names).not.toContain("x-rewrite-url");
      expect(names).not.toContain("x_original_url");
      expect(names).toContain("x-custom");
    }
  });

  it("never carry a method override or PHP's dotted spellings of owned headers, from anyone", () => {
    const raw = [
      "Host",
      "gw",
      "X-HTTP-Method-Override",
      "DELETE",
      "X-Method-Override",
      "DELETE",
      "X-HTTP-Method",
      "DELETE",
      "Tollgate.Client",
      "bob",
      "X-Original.URL",
      "/admin",
      "x.api.key",
      "mallory",
      "X.Forwarded.For",
      "6.6.6.6",
      "X.Custom",
      "kept",
    ];
    for (const trusted of [false, true]) {
      const names = forwarded(raw, trusted).map(([n]) => n);
      expect(names.filter((n) => /method|\./.test(n))).toEqual(["x.custom"]);
    }
  });

  it("carry other client-address headers only from a trusted proxy", () => {
    const names = ["X-Client-IP", "Client-IP", "CF-Connecting-IP", "Fastly-Client-IP", "X-Cluster-Client-IP"];
    const raw = ["Host", "gw", ...names.flatMap((n) => [n, "6.6.6.6"]), "Forwarded-For", "6.6.6.6"];
    raw.push(
      "X-Forwarded",
      "for=6.6.6.6",
      "X-Originating-IP",
      "6.6.6.6",
      "X-Envoy-External-Address",
      "6.6.6.6",
    );
    raw.push("X-Host", "admin.internal", "Front-End-Https", "on");
    const lower = [
      ...names,
      "Forwarded-For",
      "X-Forwarded",
      "X-Originating-IP",
      "X-Envoy-External-Address",
      "X-Host",
      "Front-End-Https",
    ].map((n) => n.toLowerCase());
    expect(forwarded(raw, false).filter(([n]) => lower.includes(n))).toEqual([]);
    expect(forwarded(raw, true).filter(([n]) => lower.includes(n))).toHaveLength(lower.length);
  });

  it("carry another X-Forwarded-* (Prefix, Port, Ssl) only from a trusted proxy", () => {
    const raw = [
      "Host",
      "gw",
      "X-Forwarded-Prefix",
      "/admin",
      "X-Forwarded-Port",
      "443",
      "X-Forwarded-Ssl",
      "on",
    ];
    const untrusted = forwarded(raw, false).map(([n]) => n);
    expect(untrusted.filter((n) => n.startsWith("x-forwarded-")).sort()).toEqual(GATEWAY_SETS.slice().sort());
    const trusted = Object.fromEntries(forwarded(raw, true));
    expect(trusted).toMatchObject({
      "x-forwarded-prefix": "/admin",
      "x-forwarded-port": "443",
      "x-forwarded-ssl": "on",
    });
  });

  it("property: whatever the client sends, none of it overrides the path, and X-Forwarded-* are the gateway's", () => {
    const dangerous = fc.constantFrom(
      "x-original-url",
      "x-rewrite-url",
      "x-forwarded-prefix",
      "x-forwarded-path",
      "x-forwarded-for",
      "x-forwarded-host",
      "x-forwarded-proto",
      "x-forwarded-port",
      "tollgate-client",
      "forwarded",
      "x-http-method-override",
      "x-api-key",
    );
    // Each dangerous name in a random case, with `-`, `_` or `.`, among ordinary token names.
    const name = fc.oneof(
      fc
        .tuple(
          dangerous,
          fc.array(fc.boolean(), { minLength: 24, maxLength: 24 }),
          fc.constantFrom("-", "_", "."),
        )
        .map(([n, upper, separator]) =>
          [...n.replaceAll("-", separator)].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(""),
        ),
      fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(name, fc.stringMatching(/^[ -~]{0,20}$/)), { maxLength: 12 }),
        (pairs) => {
          const out = forwarded(["Host", "gw", ...pairs.flat()], false);
          for (const [n] of out) {
            const folded = n.replace(/[_.]/g, "-");
            expect(["x-original-url", "x-rewrite-url", "x-http-method-override"]).not.toContain(folded);
            // The API key header itself is forwarded (without hide_credentials); no other spelling.
            if (folded === "x-api-key") expect(n).toBe("x-api-key");
            if (folded.startsWith("x-forwarded-")) {
              expect(n).toBe(folded);
              expect(GATEWAY_SETS).toContain(n);
            }
          }
          // The gateway's own X-Forwarded-* appear once each, with its values.
          const own = Object.fromEntries(out.filter(([n]) => GATEWAY_SETS.includes(n)));
          expect(own["x-forwarded-for"]).toBe("192.0.2.1");
          expect(out.filter(([n]) => n === "x-forwarded-for")).toHaveLength(1);
          expect(out.filter(([n]) => n.replace(/[_.]/g, "-") === "forwarded")).toHaveLength(0);
          expect(
            out
              .filter(([n]) => n.replace(/[_.]/g, "-").startsWith("tollgate-"))
              .map(([n]) => n)
              .sort(),
          ).toEqual(["tollgate-client", "tollgate-plan"]);
        },
      ),
      { numRuns: 300 },
    );
  });
});
