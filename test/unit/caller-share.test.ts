import { describe, expect, it } from "vitest";
import { CallerShares, type ShareHolder } from "../../src/proxy/caller-share.js";

const client = (id: string): ShareHolder => ({ kind: "client", id });

describe("CallerShares", () => {
  it("lets a lone caller use the pool until only a share of it is free", () => {
    const shares = new CallerShares();
    let taken = 0;
    while (shares.acquire("api", client("a"), 2, 8)) taken++;
    expect(taken).toBe(6);
  });

  it("always gives a caller below its share a slot, even when the pool is short", () => {
    const shares = new CallerShares();
    for (let i = 0; i < 6; i++) shares.acquire("api", client("a"), 2, 8);
    expect(shares.acquire("api", client("b"), 2, 8)).toBe(true);
    expect(shares.acquire("api", client("b"), 2, 8)).toBe(true);
    // b holds its share and the pool is short: no more for b, nor for a.
    expect(shares.acquire("api", client("b"), 2, 8)).toBe(false);
    expect(shares.acquire("api", client("a"), 2, 8)).toBe(false);
    // A third caller still gets its share.
    expect(shares.acquire("api", client("c"), 2, 8)).toBe(true);
  });

  it("counts each upstream apart and forgets callers with nothing in flight", () => {
    const shares = new CallerShares();
    for (let i = 0; i < 6; i++) shares.acquire("api", client("a"), 2, 8);
    expect(shares.acquire("other", client("a"), 2, 8)).toBe(true);
    for (let i = 0; i < 6; i++) shares.release("api", client("a"));
    shares.release("other", client("a"));
    expect(shares.size).toBe(0);
    expect(shares.holding("api", client("a"))).toBe(0);
    // A release without an acquire (a bug elsewhere) cannot make room that is not there.
    shares.release("api", client("a"));
    let taken = 0;
    while (shares.acquire("api", client("a"), 2, 8)) taken++;
    expect(taken).toBe(6);
  });
});

describe("a share of the whole pool", () => {
  it("bounds nothing", () => {
    const shares = new CallerShares();
    for (let i = 0; i < 20; i++) expect(shares.acquire("api", client("a"), 8, 8)).toBe(true);
  });
});

describe("who holds a share", () => {
  it("keeps a client and an address apart, even when the id reads like the address", () => {
    const shares = new CallerShares();
    const named: ShareHolder = { kind: "client", id: "10.0.0.1" };
    const address: ShareHolder = { kind: "anonymous", ipKey: "10.0.0.1" };
    expect(shares.acquire("api", named, 1, 8)).toBe(true);
    expect(shares.holding("api", address)).toBe(0);
    expect(shares.acquire("api", address, 1, 8)).toBe(true);
    expect(shares.size).toBe(2);
  });
});
