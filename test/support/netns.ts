// A network namespace of a test's own, joined to the host's by veth pairs the test can cut: a
// real partition (packets to the far side go nowhere, established connections hang until their
// timeouts), not a relay's imitation of one. Needs root (CAP_NET_ADMIN) and iproute2's `ip`.
import { execFileSync } from "node:child_process";

/** One veth pair: `hostAddress` on the host's side, `nsAddress` inside the namespace (a /30). */
export interface NetnsLink {
  hostAddress: string;
  nsAddress: string;
  /**
   * Takes the namespace's end down: nothing crosses this link until heal(). Packets the host
   * sends into it are dropped without an answer (its end stays up, without a carrier), and the
   * host's address stays local, so host processes still reach each other at it.
   */
  cut(): void;
  heal(): void;
}

export interface Netns {
  name: string;
  /** Prefix a command with this to run it inside the namespace. */
  exec: string[];
  links: NetnsLink[];
  /** Deletes the namespace; its veth pairs go with it. */
  remove(): void;
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Why namespaces cannot be made here, or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== "linux") return "network namespaces are Linux only";
  if (process.getuid?.() !== 0) return "making a network namespace needs root (CAP_NET_ADMIN)";
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" });
  } catch {
    return "iproute2's ip is not installed";
  }
  return undefined;
}

let made = 0;
const alive = new Set<Netns>();
process.once("exit", () => {
  for (const ns of alive) ns.remove();
});

/**
 * A namespace with its loopback up and `linkCount` veth pairs to the host, each on a /30 of
 * 10.213.0.0/16 chosen from this process's id so that two test processes do not collide.
 */
export function makeNetns(linkCount: number): Netns {
  const index = made++;
  const tag = `${process.pid % 100_000}x${index}`;
  const name = `tollgate-${tag}`;
  ip("netns", "add", name);
  const links: NetnsLink[] = [];
  const ns: Netns = {
    name,
    exec: ["ip", "netns", "exec", name],
    links,
    remove() {
      if (!alive.delete(ns)) return;
      try {
        ip("netns", "del", name);
      } catch {
        // Already gone.
      }
    },
  };
  alive.add(ns);
  try {
    ip("-n", name, "link", "set", "lo", "up");
    for (let i = 0; i < linkCount; i++) {
      const hostEnd = `tg${tag}h${i}`;
      const nsEnd = `tg${tag}n${i}`;
      // 64 /30 blocks per third octet: process id picks the octet, the link number the block.
      const third = (process.pid * 7 + index) % 256;
      const base = ((index * linkCount + i) % 64) * 4;
      const hostAddress = `10.213.${third}.${base + 1}`;
      const nsAddress = `10.213.${third}.${base + 2}`;
      ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd, "netns", name);
      ip("addr", "add", `${hostAddress}/30`, "dev", hostEnd);
      ip("-n", name, "addr", "add", `${nsAddress}/30`, "dev", nsEnd);
      ip("link", "set", hostEnd, "up");
      ip("-n", name, "link", "set", nsEnd, "up");
      links.push({
        hostAddress,
        nsAddress,
        cut: () => ip("-n", name, "link", "set", nsEnd, "down"),
        heal: () => ip("-n", name, "link", "set", nsEnd, "up"),
      });
    }
  } catch (err) {
    ns.remove();
    throw err;
  }
  return ns;
}
