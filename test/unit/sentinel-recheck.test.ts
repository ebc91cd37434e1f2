// While checks through Sentinel fail, the store asks the sentinels which master they name and
// leaves the one it is on when most of them have moved on (src/limits/stores/redis/sentinel-recheck.ts).
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { masterToMoveTo, SentinelRecheck } from "../../src/limits/stores/redis/sentinel-recheck.js";

describe("masterToMoveTo", () => {
  it("moves when more than half of the sentinels name one other master", () => {
    expect(masterToMoveTo("10.0.0.1:6379", ["10.0.0.2:6379"], 1)).toBe("10.0.0.2:6379");
    expect(masterToMoveTo("10.0.0.1:6379", ["10.0.0.2:6379", "10.0.0.2:6379", "10.0.0.1:6379"], 3)).toBe(
      "10.0.0.2:6379",
    );
  });

  it("stays while the sentinels disagree, have not moved, or did not answer", () => {
    expect(masterToMoveTo("10.0.0.1:6379", ["10.0.0.1:6379"], 1)).toBeUndefined();
    // One of three has moved: not yet.
    expect(
      masterToMoveTo("10.0.0.1:6379", ["10.0.0.2:6379", "10.0.0.1:6379", "10.0.0.1:6379"], 3),
    ).toBeUndefined();
    // Two name different masters: neither has a majority.
    expect(masterToMoveTo("10.0.0.1:6379", ["10.0.0.2:6379", "10.0.0.3:6379", undefined], 3)).toBeUndefined();
    // Silent sentinels count against: 2 of 5 is not a majority.
    expect(
      masterToMoveTo("10.0.0.1:6379", ["10.0.0.2:6379", "10.0.0.2:6379", undefined, undefined, undefined], 5),
    ).toBeUndefined();
  });

  it("takes a host name on the client's port for the master it is on (the socket knows only the IP)", () => {
    expect(masterToMoveTo("10.0.0.1:6379", ["redis-0.redis:6379"], 1)).toBeUndefined();
    expect(masterToMoveTo("10.0.0.1:6379", ["redis-1.redis:6380"], 1)).toBe("redis-1.redis:6380");
  });
});

describe("SentinelRecheck", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup(named: () => (string | undefined)[]) {
    vi.useFakeTimers();
    const client = { status: "ready", disconnect: vi.fn() };
    const disconnect = client.disconnect;
    const ask = vi.fn(async () => named());
    const recheck = new SentinelRecheck({
      client: client as unknown as Redis,
      ask,
      sentinelCount: 1,
      current: () => "10.0.0.1:6379",
      intervalMs: 200,
    });
    return { recheck, ask, disconnect, client };
  }

  it("asks only while checks fail, once per interval", async () => {
    const { recheck, ask } = setup(() => ["10.0.0.1:6379"]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).not.toHaveBeenCalled();
    recheck.failed();
    recheck.failed();
    await vi.advanceTimersByTimeAsync(0);
    expect(ask).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).toHaveBeenCalledTimes(6);
    recheck.succeeded();
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).toHaveBeenCalledTimes(6);
  });

  it("reconnects the client when the sentinels name another master, and not before", async () => {
    let named = "10.0.0.1:6379";
    const { recheck, disconnect } = setup(() => [named]);
    recheck.failed();
    await vi.advanceTimersByTimeAsync(600);
    expect(disconnect).not.toHaveBeenCalled();
    named = "10.0.0.2:6379";
    await vi.advanceTimersByTimeAsync(200);
    expect(disconnect).toHaveBeenCalledWith(true);
  });

  it("leaves a client that is reconnecting alone: it is asking the sentinels already", async () => {
    const { recheck, ask, disconnect, client } = setup(() => ["10.0.0.2:6379"]);
    client.status = "reconnecting";
    recheck.failed();
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).not.toHaveBeenCalled();
    expect(disconnect).not.toHaveBeenCalled();
    // Ready again (on the old master, say): now it may be told to move.
    client.status = "ready";
    await vi.advanceTimersByTimeAsync(200);
    expect(disconnect).toHaveBeenCalledTimes(1);
  });

  it("one question at a time: a sentinel slower than the interval is not asked again meanwhile", async () => {
    vi.useFakeTimers();
    let answer: (v: (string | undefined)[]) => void = () => {};
    const ask = vi.fn(() => new Promise<(string | undefined)[]>((r) => (answer = r)));
    const recheck = new SentinelRecheck({
      client: { status: "ready", disconnect: vi.fn() } as unknown as Redis,
      ask,
      sentinelCount: 1,
      current: () => "10.0.0.1:6379",
      intervalMs: 200,
    });
    recheck.failed();
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).toHaveBeenCalledTimes(1);
    answer(["10.0.0.1:6379"]);
    await vi.advanceTimersByTimeAsync(200);
    expect(ask).toHaveBeenCalledTimes(2);
    recheck.close();
    recheck.failed();
    await vi.advanceTimersByTimeAsync(1000);
    expect(ask).toHaveBeenCalledTimes(2);
  });
});
