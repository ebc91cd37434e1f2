// The client address behind trusted proxies.
//
// Only a peer inside `trusted_proxies` may tell us who its client was. The forwarding list is
// walked from the right (the entry our own proxy appended) toward the left, stopping at the first
// address that is not a trusted proxy: everything left of it was written by the client and can
// be forged. Exactly one header is read (`client_ip_header`), because a proxy that sets only one
// of them passes the other through untouched from the client.
import { isIP } from "node:net";
import { type CidrSet, parseIp, unwrapMapped } from "./ip.js";

export type ForwardingHeader = "x-forwarded-for" | "forwarded";

/** One hop of a forwarding list: an address, or null for `unknown`, obfuscated or garbage. */
export type Hop = Uint8Array | null;

/** Parses one X-Forwarded-For node: `1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]:80`. */
export function parseNode(raw: string): Hop {
  let text = raw.trim();
  if (text.startsWith('"') && text.endsWith('"') && text.length >= 2) text = text.slice(1, -1);
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close === -1) return null;
    const rest = text.slice(close + 1);
    if (rest !== "" && !/^:\d{1,5}$/.test(rest)) return null;
    text = text.slice(1, close);
    return isIP(text) === 6 ? unwrapOrNull(text) : null;
  }
  if (isIP(text)) return unwrapOrNull(text);
  const colon = text.lastIndexOf(":");
  if (colon > 0 && text.indexOf(":") === colon && /^\d{1,5}$/.test(text.slice(colon + 1))) {
    const host = text.slice(0, colon);
    return isIP(host) === 4 ? unwrapOrNull(host) : null;
  }
  return null;
}

function unwrapOrNull(text: string): Hop {
  const bytes = parseIp(text);
  return bytes ? unwrapMapped(bytes) : null;
}

/** Empty list elements (`a, , b`, a trailing comma) are not hops: RFC 9110 §5.6.1 says to ignore them. */
export function parseXForwardedFor(value: string): Hop[] {
  const hops: Hop[] = [];
  for (const element of value.split(",")) if (element.trim() !== "") hops.push(parseNode(element));
  return hops;
}

/**
 * RFC 7239 `Forwarded`: elements separated by commas, pairs by semicolons, values tokens or
 * quoted strings. Each element yields its `for=` node; an element without one is a null hop.
 */
export function parseForwarded(value: string): Hop[] {
  const hops: Hop[] = [];
  for (const element of splitOutsideQuotes(value, ",")) {
    if (element.trim() === "") continue;
    let hop: Hop = null;
    for (const pair of splitOutsideQuotes(element, ";")) {
      const eq = pair.indexOf("=");
      if (eq === -1) continue;
      if (pair.slice(0, eq).trim().toLowerCase() !== "for") continue;
      hop = parseNode(unquote(pair.slice(eq + 1).trim()));
    }
    hops.push(hop);
  }
  return hops;
}

function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (c === separator && !quoted) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

function unquote(text: string): string {
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"'))
    return text.slice(1, -1).replace(/\\(.)/g, "$1");
  return text;
}

/**
 * The caller's address. `peer` is the socket peer's address, IPv4-mapped already unwrapped; it is
 * returned as is (the same object) when no trusted proxy speaks for another address.
 */
export function resolveClientIp(
  peer: Uint8Array,
  headerValue: string | undefined,
  header: ForwardingHeader,
  trusted: CidrSet,
): Uint8Array {
  let address = peer;
  if (trusted.size === 0 || !headerValue || !trusted.contains(address)) return address;
  const hops = header === "forwarded" ? parseForwarded(headerValue) : parseXForwardedFor(headerValue);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // A trusted proxy handed us something that is not an address: nothing to its left can be
    // believed, so the caller is that proxy. (A forged entry from a client never gets here: the
    // walk stops at the client's real address first.)
    if (hop === null) return address;
    address = hop;
    if (!trusted.contains(address)) return address;
  }
  return address;
}
