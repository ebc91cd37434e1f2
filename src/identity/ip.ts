// IP addresses as bytes: parsing, CIDR membership, IPv4-mapped unwrapping and IPv6 prefix
// grouping. Pure and allocation-light, since it runs for every anonymous request.
import { isIPv4, isIPv6 } from "node:net";

export interface Cidr {
  bytes: Uint8Array;
  prefix: number;
}

/** Parses an IPv4 or IPv6 literal (no brackets, no port, no zone) to 4 or 16 bytes. */
export function parseIp(text: string): Uint8Array | null {
  if (isIPv4(text)) return parseV4(text);
  if (isIPv6(text)) return parseV6(text);
  return null;
}

function parseV4(text: string): Uint8Array {
  const out = new Uint8Array(4);
  const parts = text.split(".");
  for (let i = 0; i < 4; i++) out[i] = Number(parts[i]);
  return out;
}

function parseV6(text: string): Uint8Array | null {
  if (text.includes("%")) return null; // zone ids name an interface, not a caller
  let head = text;
  let v4Tail: Uint8Array | null = null;
  const lastColon = text.lastIndexOf(":");
  if (text.indexOf(".", lastColon) !== -1) {
    v4Tail = parseV4(text.slice(lastColon + 1));
    head = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [left, right] = head.split("::") as [string, string | undefined];
  const leftGroups = left ? left.split(":") : [];
  const rightGroups = right === undefined ? [] : right ? right.split(":") : [];
  const missing = 8 - leftGroups.length - rightGroups.length;
  const groups = [
    ...leftGroups,
    ...Array<string>(right === undefined ? 0 : missing).fill("0"),
    ...rightGroups,
  ];
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = Number.parseInt(g, 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 0xff;
  });
  if (v4Tail) out.set(v4Tail, 12);
  return out;
}

/** `::ffff:1.2.3.4` is the IPv4 caller 1.2.3.4: dual-stack sockets report IPv4 peers this way. */
export function unwrapMapped(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== 16) return bytes;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return bytes;
  if (bytes[10] !== 0xff || bytes[11] !== 0xff) return bytes;
  return bytes.slice(12);
}

export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // RFC 5952: compress the longest run (length ≥ 2) of zero groups.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** Parses `10.0.0.0/8`, `::1/128` or a bare address (a /32 or /128). */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf("/");
  const addr = slash === -1 ? text : text.slice(0, slash);
  const parsed = parseIp(addr);
  if (!parsed) return null;
  const bytes = unwrapMappedCidr(parsed, slash === -1 ? null : text.slice(slash + 1));
  if (!bytes) return null;
  return bytes;
}

function unwrapMappedCidr(parsed: Uint8Array, prefixText: string | null): Cidr | null {
  const max = parsed.length * 8;
  let prefix = max;
  if (prefixText !== null) {
    if (!/^\d{1,3}$/.test(prefixText)) return null;
    prefix = Number(prefixText);
    if (prefix > max) return null;
  }
  const unwrapped = unwrapMapped(parsed);
  if (unwrapped !== parsed) return { bytes: unwrapped, prefix: Math.max(0, prefix - 96) };
  return { bytes: maskBytes(parsed, prefix), prefix };
}

export function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const bits = Math.min(8, Math.max(0, prefix - i * 8));
    out[i] = bytes[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

export function cidrContains(cidr: Cidr, bytes: Uint8Array): boolean {
  if (cidr.bytes.length !== bytes.length) return false;
  const full = cidr.prefix >> 3;
  for (let i = 0; i < full; i++) if (cidr.bytes[i] !== bytes[i]) return false;
  const rest = cidr.prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (cidr.bytes[full]! & mask) === (bytes[full]! & mask);
}

/** A set of CIDRs; membership of an already-unwrapped address. */
export class CidrSet {
  private readonly cidrs: readonly Cidr[];
  constructor(cidrs: readonly Cidr[]) {
    this.cidrs = cidrs;
  }
  get size(): number {
    return this.cidrs.length;
  }
  contains(bytes: Uint8Array): boolean {
    for (const c of this.cidrs) if (cidrContains(c, bytes)) return true;
    return false;
  }
}

/**
 * The rate-limit identity of an anonymous caller: IPv4 addresses as they are, IPv6 grouped by
 * `ipv6Prefix` because one subscriber usually holds a whole /64 and could rotate through it.
 */
export function callerIpKey(bytes: Uint8Array, ipv6Prefix: number): string {
  if (bytes.length === 4 || ipv6Prefix >= 128) return formatIp(bytes);
  return `${formatIp(maskBytes(bytes, ipv6Prefix))}/${ipv6Prefix}`;
}
