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
 *
 * A quote that never closes is the client's doing (a proxy writes well-formed elements): left
 * alone it would swallow every element after it, the one our trusted proxy appended included,
 * and the client's own `for=` would win. So a line with an unterminated quote is split on every
 * comma, quotes or not, and only elements whose own quotes balance are read; the others are null
 * hops, where the walk stops. What the proxy appended (no comma inside) is always seen.
 */
export function parseForwarded(value: string): Hop[] {
  const split = splitOutsideQuotes(value, ",");
  const hops: Hop[] = [];
  if (split.unterminatedAt === -1) {
    for (const element of split.parts) if (element.trim() !== "") hops.push(forwardedElement(element));
    return hops;
  }
  for (const element of value.split(",")) {
    if (element.trim() === "") continue;
    hops.push(splitOutsideQuotes(element, ";").unterminatedAt === -1 ? forwardedElement(element) : null);
  }
  return hops;
}

function forwardedElement(element: string): Hop {
  let hop: Hop = null;
  let seenFor = false;
  for (const pair of splitOutsideQuotes(element, ";").parts) {
    const eq = pair.indexOf("=");
    if (eq === -1) continue;
    if (pair.slice(0, eq).trim().toLowerCase() !== "for") continue;
    // Two for= in one element: which one the proxy meant cannot be told, so neither is believed.
    if (seenFor) return null;
    seenFor = true;
    hop = parseNode(unquote(pair.slice(eq + 1).trim()));
  }
  return hop;
}

/**
 * Splits on `separator` outside quoted strings. `unterminatedAt` is the index of a quote that
 * never closes (-1 when every quote closes); the text from it on is the last part.
 */
function splitOutsideQuotes(text: string, separator: string): { parts: string[]; unterminatedAt: number } {
  const parts: string[] = [];
  let start = 0;
  let openedAt = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (openedAt !== -1) {
      if (c === "\\") i++;
      else if (c === '"') openedAt = -1;
    } else if (c === '"') openedAt = i;
    else if (c === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return { parts, unterminatedAt: openedAt };
}

function unquote(text: string): string {
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"'))
    return text.slice(1, -1).replace(/\\(.)/g, "$1");
  return text;
}

/**
 * The caller's address. `peer` is the socket peer's address, IPv4-mapped already unwrapped; it is
 * returned as is (the same object) when no trusted proxy speaks for another address. `headerValue`
 * is the header's field lines: each `Forwarded` line is parsed on its own, so a malformed line a
 * client sent cannot reach into the line its proxy appended.
 */
export function resolveClientIp(
  peer: Uint8Array,
  headerValue: string | readonly string[] | undefined,
  header: ForwardingHeader,
  trusted: CidrSet,
): Uint8Array {
  let address = peer;
  if (trusted.size === 0 || headerValue === undefined || !trusted.contains(address)) return address;
  const lines = typeof headerValue === "string" ? [headerValue] : headerValue;
  const hops: Hop[] = [];
  for (const line of lines) {
    for (const hop of header === "forwarded" ? parseForwarded(line) : parseXForwardedFor(line))
      hops.push(hop);
  }
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

/** Every field line of one header, in order, from Node's `rawHeaders`. */
export function fieldLines(rawHeaders: readonly string[], lowerName: string): string[] | undefined {
  let lines: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === lowerName.length && rawHeaders[i]!.toLowerCase() === lowerName) {
      if (lines === undefined) lines = [];
      lines.push(rawHeaders[i + 1]!);
    }
  }
  return lines;
}
