import { describe, expect, it } from "vitest";
import {
  parseForwarded,
  parseNode,
  parseXForwardedFor,
  resolveClientIp,
} from "../../src/identity/forwarded.js";
import { CidrSet, callerIpKey, formatIp, parseCidr, parseIp, unwrapMapped } from "../../src/identity/ip.js";

const trusted = (...cidrs: string[]) => new CidrSet(cidrs.map((c) => parseCidr(c)!));
const fmt = (b: Uint8Array | null) => (b ? formatIp(b) : null);

describe("IP addresses", () => {
  it("parses and formats v4 and v6 (RFC 5952)", () => {
    expect(fmt(parseIp("10.1.2.3"))).toBe("10.1.2.3");
    expect(fmt(parseIp("2001:0db8:0000:0000:0000:0000:0000:0001"))).toBe("2001:db8::1");
    expect(fmt(parseIp("::1"))).toBe("::1");
    expect(fmt(parseIp("::"))).toBe("::");
    expect(fmt(parseIp("1:0:0:2:0:0:0:3"))).toBe("1:0:0:2::3");
    expect(parseIp("300.1.1.1")).toBeNull();
    expect(parseIp("fe80::1%eth0")).toBeNull();
  });

  it("unwraps IPv4-mapped IPv6", () => {
    expect(fmt(unwrapMapped(parseIp("::ffff:192.0.2.7")!))).toBe("192.0.2.7");
    expect(fmt(unwrapMapped(parseIp("::ffff:c000:0207")!))).toBe("192.0.2.7");
    expect(fmt(unwrapMapped(parseIp("2001:db8::1")!))).toBe("2001:db8::1");
  });

  it("matches CIDRs, including mapped forms of IPv4 ranges", () => {
    const set = trusted("10.0.0.0/8", "::1/128", "::ffff:172.16.0.0/108");
    expect(set.contains(parseIp("10.200.0.1")!)).toBe(true);
    expect(set.contains(parseIp("11.0.0.1")!)).toBe(false);
    expect(set.contains(parseIp("::1")!)).toBe(true);
    expect(set.contains(parseIp("172.16.5.5")!)).toBe(true);
    expect(set.contains(parseIp("172.32.0.1")!)).toBe(false);
    expect(parseCidr("10.0.0.0/33")).toBeNull();
    expect(parseCidr("10.0.0.0/x")).toBeNull();
  });

  it("groups IPv6 callers by prefix", () => {
    expect(callerIpKey(parseIp("2001:db8:1:2:aaaa::1")!, 64)).toBe("2001:db8:1:2::/64");
    expect(callerIpKey(parseIp("2001:db8:1:2:bbbb::9")!, 64)).toBe("2001:db8:1:2::/64");
    expect(callerIpKey(parseIp("192.0.2.1")!, 64)).toBe("192.0.2.1");
    expect(callerIpKey(parseIp("2001:db8::1")!, 128)).toBe("2001:db8::1");
  });
});

describe("forwarding headers", () => {
  it("parses X-Forwarded-For nodes with and without ports", () => {
    expect(parseXForwardedFor("1.2.3.4, [2001:db8::1]:443, 5.6.7.8:80, ::1, junk").map(fmt)).toEqual([
      "1.2.3.4",
      "2001:db8::1",
      "5.6.7.8",
      "::1",
      null,
    ]);
    expect(fmt(parseNode("::ffff:1.2.3.4"))).toBe("1.2.3.4");
  });

  it("parses RFC 7239 Forwarded", () => {
    const hops = parseForwarded(
      'for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711", For=unknown, for=_hidden, proto=https',
    );
    expect(hops.map(fmt)).toEqual(["192.0.2.60", "2001:db8:cafe::17", null, null, null]);
  });

  const proxies = trusted("127.0.0.1/32", "10.0.0.0/8");
  const resolve = (
    peer: string,
    header: string | undefined,
    kind: "x-forwarded-for" | "forwarded" = "x-forwarded-for",
  ) => fmt(resolveClientIp(peerBytes(peer), header, kind, proxies));
  const peerBytes = (peer: string) => unwrapMapped(parseIp(peer)!);

  it.each([
    // [peer, header, expected caller for a trusted peer]
    ["127.0.0.1", "203.0.113.9", "203.0.113.9"],
    ["127.0.0.1", "1.1.1.1, 203.0.113.9", "203.0.113.9"], // spoofed left entry ignored
    ["127.0.0.1", "203.0.113.9, 10.0.0.5", "203.0.113.9"], // walks past a trusted hop
    ["127.0.0.1", "10.0.0.7, 10.0.0.5", "10.0.0.7"], // all trusted: the leftmost
    ["127.0.0.1", "203.0.113.9, garbage", "127.0.0.1"], // garbage from our own proxy: stop there
    ["127.0.0.1", "garbage, 203.0.113.9", "203.0.113.9"], // client-side garbage never reached
    ["127.0.0.1", "::ffff:203.0.113.9", "203.0.113.9"],
    ["::ffff:127.0.0.1", "203.0.113.9", "203.0.113.9"], // mapped peer is trusted too
    ["127.0.0.1", "[2001:db8::5]:1234", "2001:db8::5"],
    ["127.0.0.1", "", "127.0.0.1"],
  ])("trusted peer %s with %j → %s", (peer, header, expected) =>
    expect(resolve(peer, header)).toBe(expected),
  );

  it("ignores forwarding headers from an untrusted peer", () => {
    expect(resolve("198.51.100.1", "203.0.113.9")).toBe("198.51.100.1");
    expect(resolve("::ffff:198.51.100.1", "1.2.3.4")).toBe("198.51.100.1");
    expect(resolve("198.51.100.1", 'for="1.2.3.4"', "forwarded")).toBe("198.51.100.1");
  });

  it("reads Forwarded when configured, walking from the right", () => {
    expect(resolve("127.0.0.1", 'for=1.1.1.1, for="[2001:db8::1]:80"', "forwarded")).toBe("2001:db8::1");
    expect(resolve("127.0.0.1", "for=1.1.1.1, for=unknown", "forwarded")).toBe("127.0.0.1");
  });

  // Issue 13.4: an open quote swallowed the element the trusted proxy appended, and the client's
  // own for= became the caller.
  it("an unterminated quote never hides what the trusted proxy appended", () => {
    const joined = 'for=10.0.0.7;x=", for=5.6.7.8';
    expect(resolve("127.0.0.1", joined, "forwarded")).toBe("5.6.7.8");
    const lines = ['for=10.0.0.7;x="', "for=5.6.7.8"];
    expect(fmt(resolveClientIp(peerBytes("127.0.0.1"), lines, "forwarded", proxies))).toBe("5.6.7.8");
    // The proxy's own line quotes its value: parsed on its own, it still wins.
    const quoted = ['for=10.0.0.7;x="', 'for="[2001:db8::1]:4711"'];
    expect(fmt(resolveClientIp(peerBytes("127.0.0.1"), quoted, "forwarded", proxies))).toBe("2001:db8::1");
    // Malformed and trusted-looking to the left of a real address: the walk stops at the address.
    expect(parseForwarded('for=10.0.0.7;x="a, for=5.6.7.8, for=9.9.9.9').map(fmt)).toEqual([
      null,
      "5.6.7.8",
      "9.9.9.9",
    ]);
    // The proxy extended the client's line with a quoted value.
    expect(parseForwarded('for=10.0.0.7;x=", for="5.6.7.8"').map(fmt)).toEqual([null, "5.6.7.8"]);
    // An escaped quote does not close the string.
    expect(parseForwarded('for=10.0.0.7;x="\\", for=5.6.7.8').map(fmt)).toEqual([null, "5.6.7.8"]);
    // Two for= in one element: neither is believed.
    expect(parseForwarded("for=10.0.0.7;for=5.6.7.8").map(fmt)).toEqual([null]);
  });

  it("with no trusted proxies, always the peer", () => {
    expect(
      fmt(
        resolveClientIp(unwrapMapped(parseIp("127.0.0.1")!), "1.2.3.4", "x-forwarded-for", new CidrSet([])),
      ),
    ).toBe("127.0.0.1");
  });
});
