// The caller IP for forwarding headers as an attacker or a misconfigured chain would send them,
// from a trusted proxy and from an untrusted peer. Several field lines arrive joined with ", "
// (as Node presents them); the walk goes from the right and stops at the first untrusted hop.
import { describe, expect, it } from "vitest";
import { resolveClientIp } from "../../src/identity/forwarded.js";
import { CidrSet, formatIp, parseCidr, parseIp, unwrapMapped } from "../../src/identity/ip.js";

const proxies = new CidrSet(["127.0.0.1/32", "10.0.0.0/8", "2001:db8:ffff::/48"].map((c) => parseCidr(c)!));
const TRUSTED_PEER = "10.0.0.2";
const UNTRUSTED_PEER = "198.51.100.7";

type Kind = "x-forwarded-for" | "forwarded";
const lines = (...values: string[]) => values.join(", ");

// [what it is, header kind, header value (undefined: absent), caller when the peer is trusted]
const CASES: [string, Kind, string | undefined, string][] = [
  ["no header", "x-forwarded-for", undefined, TRUSTED_PEER],
  ["one client", "x-forwarded-for", "203.0.113.9", "203.0.113.9"],
  ["spoofed left entries", "x-forwarded-for", "1.1.1.1, 8.8.8.8, 203.0.113.9", "203.0.113.9"],
  ["client behind two trusted hops", "x-forwarded-for", "203.0.113.9, 10.1.1.1, 127.0.0.1", "203.0.113.9"],
  ["spoof in a second field line", "x-forwarded-for", lines("6.6.6.6", "203.0.113.9"), "203.0.113.9"],
  [
    "three field lines, trusted hops last",
    "x-forwarded-for",
    lines("6.6.6.6", "203.0.113.9", "10.0.0.9"),
    "203.0.113.9",
  ],
  ["IPv4 with a port", "x-forwarded-for", "203.0.113.9:51234", "203.0.113.9"],
  ["bracketed IPv6 with a port", "x-forwarded-for", "[2001:db8::9]:443", "2001:db8::9"],
  ["bare IPv6", "x-forwarded-for", "2001:db8::9", "2001:db8::9"],
  ["IPv4-mapped IPv6 is IPv4", "x-forwarded-for", "::ffff:203.0.113.9", "203.0.113.9"],
  ["trusted IPv6 hop walked past", "x-forwarded-for", "203.0.113.9, 2001:db8:ffff::1", "203.0.113.9"],
  ["garbage nearest us: stop at our proxy", "x-forwarded-for", "203.0.113.9, not-an-ip", TRUSTED_PEER],
  ["garbage on the client's side never reached", "x-forwarded-for", "<script>, 203.0.113.9", "203.0.113.9"],
  ["empty elements", "x-forwarded-for", " , ,203.0.113.9, ", "203.0.113.9"],
  ["every hop trusted: the leftmost", "x-forwarded-for", "10.0.0.7, 10.0.0.5", "10.0.0.7"],
  ["a huge spoofed list", "x-forwarded-for", `${"1.2.3.4, ".repeat(500)}203.0.113.9`, "203.0.113.9"],
  ["Forwarded: one hop", "forwarded", "for=203.0.113.9", "203.0.113.9"],
  ["Forwarded: quoted IPv6 with a port", "forwarded", 'for="[2001:db8:cafe::17]:4711"', "2001:db8:cafe::17"],
  [
    "Forwarded: other parameters and case",
    "forwarded",
    "proto=https;For=203.0.113.9;by=10.0.0.1",
    "203.0.113.9",
  ],
  ["Forwarded: spoofed left hop", "forwarded", "for=1.1.1.1, for=203.0.113.9", "203.0.113.9"],
  [
    "Forwarded: several field lines",
    "forwarded",
    lines("for=6.6.6.6", 'for="203.0.113.9:80"', "for=10.0.0.3"),
    "203.0.113.9",
  ],
  ["Forwarded: unknown nearest us", "forwarded", "for=203.0.113.9, for=unknown", TRUSTED_PEER],
  ["Forwarded: obfuscated identifier", "forwarded", "for=203.0.113.9, for=_hidden", TRUSTED_PEER],
  ["Forwarded: mapped IPv6", "forwarded", 'for="[::ffff:203.0.113.9]"', "203.0.113.9"],
  ["Forwarded: garbage", "forwarded", 'for="[oops', TRUSTED_PEER],
  ["Forwarded: quoted string with a comma inside", "forwarded", 'for=203.0.113.9;ext="a,b"', "203.0.113.9"],
];

const caller = (peer: string, kind: Kind, value: string | undefined) => {
  const ip = resolveClientIp(unwrapMapped(parseIp(peer)!), value, kind, proxies);
  return formatIp(ip);
};

describe(`${CASES.length} forwarding-header cases`, () => {
  it.each(CASES)("%s (%s: %j)", (_what, kind, value, fromTrusted) => {
    expect(caller(TRUSTED_PEER, kind, value)).toBe(fromTrusted);
    // From a peer outside trusted_proxies the header is never read.
    expect(caller(UNTRUSTED_PEER, kind, value)).toBe(UNTRUSTED_PEER);
    expect(caller(`::ffff:${UNTRUSTED_PEER}`, kind, value)).toBe(UNTRUSTED_PEER);
  });
});
