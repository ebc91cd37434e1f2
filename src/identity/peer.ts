// The socket peer, parsed once per connection: keep-alive connections carry many requests and
// the peer cannot change underneath them.
import type { Socket } from "node:net";
import { callerIpKey, formatIp, parseIp, unwrapMapped } from "./ip.js";

export interface Peer {
  bytes: Uint8Array;
  /** Canonical text, IPv4-mapped addresses unwrapped: what X-Forwarded-For gets. */
  text: string;
  /** callerIpKey(bytes, prefix) for the last prefix asked; configs rarely change it. */
  ipKey: string;
  ipKeyPrefix: number;
}

const PEER = Symbol("tollgate.peer");

type SocketWithPeer = Socket & { [PEER]?: Peer | null };

export function socketPeer(socket: Socket): Peer | null {
  const s = socket as SocketWithPeer;
  const cached = s[PEER];
  if (cached !== undefined) return cached;
  const raw = socket.remoteAddress ? parseIp(socket.remoteAddress) : null;
  const bytes = raw ? unwrapMapped(raw) : null;
  const peer = bytes ? { bytes, text: formatIp(bytes), ipKey: "", ipKeyPrefix: -1 } : null;
  // A closed socket has no address yet; do not cache that, a later call may succeed.
  if (peer) s[PEER] = peer;
  return peer;
}

/** The caller key of an address, reusing the peer's when the address is the peer itself. */
export function ipKeyFor(ip: Uint8Array, peer: Peer, ipv6Prefix: number): string {
  if (ip !== peer.bytes) return callerIpKey(ip, ipv6Prefix);
  if (peer.ipKeyPrefix !== ipv6Prefix) {
    peer.ipKey = callerIpKey(ip, ipv6Prefix);
    peer.ipKeyPrefix = ipv6Prefix;
  }
  return peer.ipKey;
}
