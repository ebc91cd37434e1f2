// What a credential gets from an address past `identity.auth_failures` when this instance cannot
// tell it valid without work an attacker could make it repeat (a store lookup, a signature check).
// What it can tell cheaply still passes: a YAML key (a hash and a map), a stored key it has served
// (its cache), a JWT it verified before (its cache until the token expires). So a flood of bad
// keys from a shared address (a NAT, a proxy not in trusted_proxies) costs its neighbours' known
// keys nothing; a key never served by this instance waits out the window.
import type { Identification } from "../model/caller.js";

export const THROTTLED: Identification = {
  ok: false,
  reason: "throttled",
  detail:
    "too many invalid credentials came from this address: a credential this gateway has not served before is refused unread",
};
